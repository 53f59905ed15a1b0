// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Gatehouse",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "GatehouseKernel", targets: ["GatehouseKernel"]),
        .library(name: "GatehouseYAML", targets: ["GatehouseYAML"]),
        .library(name: "GatehousePlugins", targets: ["GatehousePlugins"]),
        .library(name: "GatehouseTesting", targets: ["GatehouseTesting"]),
        .library(name: "PINAuthenticator", targets: ["PINAuthenticator"]),
        .library(name: "XignInValidators", targets: ["XignInValidators"]),
        .executable(name: "validate-input", targets: ["ValidateInput"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        // The kernel: protocols, registry, manifest schema, challenges, errors. Foundation and swift-log only.
        .target(
            name: "GatehouseKernel",
            dependencies: [.product(name: "Logging", package: "swift-log")]
        ),
        // YAML manifests, kept out of the kernel so the kernel stays Foundation + swift-log.
        .target(
            name: "GatehouseYAML",
            dependencies: ["GatehouseKernel", .product(name: "Yams", package: "Yams")]
        ),
        // Every built-in plugin in one registry value.
        .target(
            name: "GatehousePlugins",
            dependencies: ["GatehouseKernel", "PINAuthenticator", "XignInValidators"]
        ),
        .target(
            name: "GatehouseTesting",
            dependencies: [
                "GatehouseKernel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),

        // Plugins: each depends on the kernel only.
        .target(name: "PINAuthenticator", dependencies: ["GatehouseKernel"], path: "Plugins/PINAuthenticator"),
        .target(name: "XignInValidators", dependencies: ["GatehouseKernel"], path: "Plugins/XignInValidators"),

        // Examples.
        .target(
            name: "PostalCodeValidator",
            dependencies: ["GatehouseKernel"],
            path: "Examples/PostalCodeValidator"
        ),
        .executableTarget(
            name: "ValidateInput",
            dependencies: ["GatehouseKernel", "GatehouseYAML", "GatehousePlugins", "PostalCodeValidator"],
            path: "Examples/ValidateInput"
        ),

        // Tests: one target per plugin (that plugin + kernel + GatehouseTesting only), plus the rest.
        .testTarget(
            name: "PINAuthenticatorTests",
            dependencies: ["PINAuthenticator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "XignInValidatorsTests",
            dependencies: ["XignInValidators", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "PostalCodeValidatorTests",
            dependencies: ["PostalCodeValidator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(name: "GatehouseKernelTests", dependencies: ["GatehouseKernel", "GatehouseTesting"]),
        .testTarget(
            name: "GatehouseManifestTests",
            dependencies: ["GatehouseKernel", "GatehouseYAML", "GatehousePlugins", "GatehouseTesting"]
        ),
        .testTarget(name: "ExamplesTests", dependencies: ["ValidateInput"]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .plugin {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
