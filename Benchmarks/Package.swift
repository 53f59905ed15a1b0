// swift-tools-version:6.1
import PackageDescription

// The benchmark in a package of its own, so an integrator who depends on Gatehouse resolves none
// of its dependencies: `swift run -c release --package-path Benchmarks gatehouse-bench`, or
// scripts/benchmark (see docs/PERFORMANCE.md).
let package = Package(
    name: "GatehouseBenchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "gatehouse-bench", targets: ["GatehouseBenchmark"])
    ],
    dependencies: [
        .package(name: "Gatehouse", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The latency percentiles.
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .executableTarget(
            name: "GatehouseBenchmark",
            dependencies: [
                .product(name: "GatehouseKernel", package: "Gatehouse"),
                .product(name: "GatehouseProtocol", package: "Gatehouse"),
                .product(name: "GatehouseClient", package: "Gatehouse"),
                .product(name: "GatehouseServer", package: "Gatehouse"),
                // LoopbackPort, for PostgresTestCluster.swift: a link to the test-support target's file.
                .product(name: "GatehouseTesting", package: "Gatehouse"),
                .product(name: "GatehousePlugins", package: "Gatehouse"),
                .product(name: "GatehouseYAML", package: "Gatehouse"),
                .product(name: "BiometricAuthenticator", package: "Gatehouse"),
                .product(name: "PINAuthenticator", package: "Gatehouse"),
                .product(name: "CustomAPIIdentityProvider", package: "Gatehouse"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "GatehouseBenchmark",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
                .enableUpcomingFeature("InternalImportsByDefault"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
