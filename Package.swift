// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Gatehouse",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "GatehouseKernel", targets: ["GatehouseKernel"]),
        // The wire types and proofs that the SDK and the token server share; an integrator's own
        // API (GatehouseResourceServer) and the benchmark use them too.
        .library(name: "GatehouseProtocol", targets: ["GatehouseProtocol"]),
        .library(name: "GatehouseYAML", targets: ["GatehouseYAML"]),
        .library(name: "GatehousePlugins", targets: ["GatehousePlugins"]),
        .library(name: "GatehouseTesting", targets: ["GatehouseTesting"]),
        .library(name: "PINAuthenticator", targets: ["PINAuthenticator"]),
        .library(name: "BiometricAuthenticator", targets: ["BiometricAuthenticator"]),
        .library(name: "XignInValidators", targets: ["XignInValidators"]),
        .library(name: "CustomAPIIdentityProvider", targets: ["CustomAPIIdentityProvider"]),
        .library(name: "BrowserIdentityProvider", targets: ["BrowserIdentityProvider"]),
        .library(name: "GatehouseServer", targets: ["GatehouseServer"]),
        // APNs and FCM senders for the token server's pushes (`gatehouse serve` uses them).
        .library(name: "GatehousePush", targets: ["GatehousePush"]),
        .library(name: "GatehouseClient", targets: ["GatehouseClient"]),
        // An app's XignIn registration (Examples/XignInRegistration shows one).
        .library(name: "XignInClient", targets: ["XignInClient"]),
        .library(name: "GatehouseResourceServer", targets: ["GatehouseResourceServer"]),
        .library(name: "GatehouseCommands", targets: ["GatehouseCommands"]),
        .library(name: "GatehouseLogin", targets: ["GatehouseLogin"]),
        // The admin console for a helpdesk, mounted under /admin/ beside the hosted login.
        .library(name: "GatehouseAdminConsole", targets: ["GatehouseAdminConsole"]),
        .library(name: "GatehouseQRCode", targets: ["GatehouseQRCode"]),
        // JOSE, discovery and a relying party for OpenID Connect: the hosted login signs with it,
        // federates through it, and a web app can sign in with it.
        .library(name: "GatehouseOpenID", targets: ["GatehouseOpenID"]),
        .library(name: "TOTPAuthenticator", targets: ["TOTPAuthenticator"]),
        .library(name: "InvitationIdentityProvider", targets: ["InvitationIdentityProvider"]),
        // The relying party's side of WebAuthn (passkeys): options, registration and sign-in checks.
        .library(name: "GatehouseWebAuthn", targets: ["GatehouseWebAuthn"]),
        .executable(name: "gatehouse", targets: ["gatehouse"]),
        .executable(name: "gatehouse-server", targets: ["gatehouse-server"]),
        .library(name: "GatehouseServerCommand", targets: ["GatehouseServerCommand"]),
        .executable(name: "validate-input", targets: ["ValidateInput"]),
        .executable(name: "xignin-registration", targets: ["XignInRegistration"]),
        .executable(name: "totp-gatehouse", targets: ["ThirdPartyAuthenticator"]),
        .executable(name: "pin-length-store", targets: ["PinLengthStore"]),
        .executable(name: "push-mobile-auth", targets: ["PushMobileAuth"]),
        .executable(name: "resource-gateway", targets: ["ResourceGateway"]),
        .executable(name: "web-shop", targets: ["WebShop"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // `swift package generate-documentation` (scripts/docs); the articles show Snippets/ as compiled code.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // The hosted login's pages are Mustache templates.
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        // Operations: connection limits in the HTTP pipeline, metrics in the Prometheus format,
        // `serve` settings from the environment.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        // The server side's own HTTP calls (callbacks, webhooks, introspection).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The token server's PostgreSQL store, for several instances on one database.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // WebAuthn's packed attestation with a certificate (x5c): the attestation certificate's checks.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // The tests' stand-ins for APNs and FCM speak HTTP/2 (AsyncHTTPClient resolves it anyway).
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        // Tracing: spans through swift-distributed-tracing's API, exported by `serve` over OTLP/HTTP
        // when the OTEL_* variables ask for it. Only the OTLP/HTTP exporter: the gRPC one would add
        // gRPC Swift to every clean build.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
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
        // Wire types and proofs shared by the client SDK and the token server.
        .target(
            name: "GatehouseProtocol",
            dependencies: ["GatehouseKernel", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // OpenID Connect: JWKs and JWSs (RS256, ES256), ID-token claims, discovery documents, and
        // a relying party (code + PKCE + nonce, ID tokens checked against the provider's JWKS).
        .target(
            name: "GatehouseOpenID",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseOutbound",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The server side's outbound HTTP calls through AsyncHTTPClient: timeouts, no redirects.
        .target(
            name: "GatehouseOutbound",
            dependencies: [
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The token server as a library: HTTP through Hummingbird, state in SQLite through GRDB or in
        // PostgreSQL through postgres-nio.
        .target(
            name: "GatehouseServer",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseOutbound", "GatehouseQRCode",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Real push delivery: APNs (HTTP/2, ES256 provider tokens) and FCM HTTP v1 (a service
        // account's RS256 assertion for OAuth 2 access tokens), through AsyncHTTPClient. Apart from
        // GatehouseServer so an embedded server does not carry RSA, TLS trust and key files.
        .target(
            name: "GatehousePush",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "GatehouseOutbound",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        // What an integrator's own API adds to accept Gatehouse tokens: a framework-free validator
        // (DPoP, introspection in-process or over HTTP) and a Hummingbird middleware.
        .target(
            name: "GatehouseResourceServer",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseOutbound",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The SDK an app embeds.
        .target(
            name: "GatehouseClient",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                // Requests and the events channel on Linux, where URLSession spins on an idle
                // stream and re-sends a request without its body (HTTPTransport+NIO.swift).
                .product(
                    name: "AsyncHTTPClient",
                    package: "async-http-client",
                    condition: .when(platforms: [.linux])
                ),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: [.linux])),
            ]
        ),
        // The server's command as a library, without the client SDK: `gatehouse serve` and
        // `gatehouse-server` run it, with any plugin registry.
        .target(
            name: "GatehouseServerCommand",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "GatehouseYAML", "GatehousePlugins",
                "CustomAPIIdentityProvider", "XignInManager", "GatehouseLogin", "GatehousePush",
                "GatehouseAdminConsole", "BiometricAuthenticator", "BrowserIdentityProvider",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // `gatehouse-server`: the token server alone, with the built-in plugins (what operators deploy).
        .executableTarget(
            name: "gatehouse-server",
            dependencies: ["GatehouseServerCommand", "GatehouseKernel", "GatehousePlugins"]
        ),
        // The command line as a library: serve, demo, device and authenticator commands, run with
        // any plugin registry (an integrator's executable composes it with its own plugins).
        .target(
            name: "GatehouseCommands",
            dependencies: [
                "GatehouseServerCommand",
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "GatehouseClient", "GatehouseYAML",
                "GatehousePlugins", "CustomAPIIdentityProvider", "XignInManager", "XignInClient", "XignInValidators",
                "GatehouseLogin", "GatehousePush", "GatehouseAdminConsole",
                "BiometricAuthenticator", "BrowserIdentityProvider",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // `gatehouse manifest example`: Examples/manifests compiled in, so they work from any folder.
            plugins: ["EmbedExampleManifests"]
        ),
        // The build-time tool that writes Examples/manifests into GatehouseCommands as Swift source,
        // and the build-tool plugin that runs it whenever one of those files changes.
        .executableTarget(name: "ExampleManifestEmbedder", path: "BuildTools/ExampleManifestEmbedder"),
        .plugin(
            name: "EmbedExampleManifests",
            capability: .buildTool(),
            dependencies: ["ExampleManifestEmbedder"],
            path: "BuildTools/EmbedExampleManifests"
        ),
        // The `gatehouse` tool: the commands with the built-in plugins.
        .executableTarget(
            name: "gatehouse",
            dependencies: ["GatehouseCommands", "GatehouseKernel", "GatehousePlugins"]
        ),
        // The hosted login: a user directory, the login page and authorization codes with PKCE.
        .target(
            name: "GatehouseLogin",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "BrowserIdentityProvider",
                "GatehouseOpenID", "GatehouseOutbound", "GatehouseQRCode", "GatehouseWebAuthn",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The admin console: server-rendered pages under /admin/ where operators, signed in through
        // the hosted login with a second factor, find users and act through the admin service.
        .target(
            name: "GatehouseAdminConsole",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "GatehouseLogin", "GatehouseOpenID",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // WebAuthn Level 2 for passkeys, the relying party's side: creation and request options, and
        // registration (attestation none and packed) and authentication checks with ES256, EdDSA and RS256.
        .target(
            name: "GatehouseWebAuthn",
            dependencies: [
                // ConstantTime, the kernel's.
                "GatehouseKernel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        // The XignIn manager, mounted on the token server, and the XignIn registry client.
        .target(
            name: "XignInManager",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseServer", "XignInValidators", "GatehouseOutbound",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "XignInClient",
            dependencies: [
                "GatehouseKernel", "GatehouseProtocol", "GatehouseClient", "XignInValidators",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // QR codes (ISO/IEC 18004, byte mode) drawn as SVG and PNG, for one-time codes on pages. No dependencies.
        .target(name: "GatehouseQRCode"),
        // Every built-in plugin in one registry value.
        .target(
            name: "GatehousePlugins",
            dependencies: [
                "GatehouseKernel", "PINAuthenticator", "BiometricAuthenticator", "XignInValidators",
                "CustomAPIIdentityProvider", "BrowserIdentityProvider",
            ]
        ),
        .target(
            name: "GatehouseTesting",
            dependencies: [
                "GatehouseKernel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        // Gatehouse's own tests (and the benchmark's --cluster) run the token server on a private
        // PostgreSQL server: a test-support target, not a product, so integrators' GatehouseTesting
        // stays free of it.
        .target(name: "GatehousePostgresTestSupport", dependencies: ["GatehouseTesting"]),

        // Plugins: each depends on the kernel only.
        .target(
            name: "PINAuthenticator",
            dependencies: [
                "GatehouseKernel",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            path: "Plugins/PINAuthenticator"
        ),
        .target(
            name: "BiometricAuthenticator",
            dependencies: ["GatehouseKernel", .product(name: "Crypto", package: "swift-crypto")],
            path: "Plugins/BiometricAuthenticator"
        ),
        .target(name: "XignInValidators", dependencies: ["GatehouseKernel"], path: "Plugins/XignInValidators"),
        .target(
            name: "CustomAPIIdentityProvider",
            dependencies: ["GatehouseKernel", "GatehouseOutbound"],
            path: "Plugins/CustomAPIIdentityProvider"
        ),
        .target(
            name: "BrowserIdentityProvider",
            dependencies: ["GatehouseKernel", .product(name: "Crypto", package: "swift-crypto")],
            path: "Plugins/BrowserIdentityProvider"
        ),

        // Examples.
        .target(
            name: "PostalCodeValidator",
            dependencies: ["GatehouseKernel"],
            path: "Examples/PostalCodeValidator"
        ),
        .executableTarget(
            name: "ValidateInput",
            dependencies: [
                "GatehouseKernel", "GatehouseYAML", "GatehousePlugins", "PostalCodeValidator",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Examples/ValidateInput"
        ),

        .executableTarget(
            name: "XignInRegistration",
            dependencies: [
                "GatehouseKernel", "GatehousePlugins", "GatehouseServer", "GatehouseYAML", "CustomAPIIdentityProvider",
                "XignInClient", "XignInManager", "XignInValidators", "GatehouseOutbound",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/XignInRegistration"
        ),

        // An integrator's custom authenticator in one file, against the kernel (and crypto) only.
        .target(
            name: "TOTPAuthenticator",
            dependencies: ["GatehouseKernel", .product(name: "Crypto", package: "swift-crypto")],
            path: "Examples/TOTPAuthenticator"
        ),
        // An integrator's identity provider in one file: single-use invitation codes from the manifest.
        .target(
            name: "InvitationIdentityProvider",
            dependencies: ["GatehouseKernel", .product(name: "Crypto", package: "swift-crypto")],
            path: "Examples/InvitationIdentityProvider"
        ),

        // An integrator's executable: Gatehouse's commands with the TOTP and invitation examples added.
        .executableTarget(
            name: "ThirdPartyAuthenticator",
            dependencies: [
                "GatehouseCommands", "GatehouseKernel", "GatehousePlugins", "TOTPAuthenticator",
                "InvitationIdentityProvider",
            ],
            path: "Examples/ThirdPartyAuthenticator"
        ),

        // Seed 004's PIN-length store against an embedded server whose PIN policy changes.
        .executableTarget(
            name: "PinLengthStore",
            dependencies: [
                "GatehouseClient", "GatehouseKernel", "GatehousePlugins", "GatehouseServer", "GatehouseYAML",
                "CustomAPIIdentityProvider", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/PinLengthStore"
        ),

        // Mobile authentication with push in one process: server, portal and device.
        .executableTarget(
            name: "PushMobileAuth",
            dependencies: [
                "GatehouseClient", "GatehouseKernel", "GatehousePlugins", "GatehouseProtocol", "GatehouseServer",
                "GatehouseYAML", "CustomAPIIdentityProvider", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/PushMobileAuth"
        ),

        // An integrator's API that accepts Gatehouse tokens (GatehouseResourceServer).
        .executableTarget(
            name: "ResourceGateway",
            dependencies: [
                "GatehouseProtocol", "GatehouseResourceServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ResourceGateway"
        ),

        // A web application that signs its users in with an OpenID provider (GatehouseOpenID).
        .executableTarget(
            name: "WebShop",
            dependencies: [
                "GatehouseOpenID",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/WebShop"
        ),

        // The benchmark is a package of its own (Benchmarks/Package.swift), so integrators resolve
        // none of its dependencies.

        // Tests: one target per plugin (that plugin + kernel + GatehouseTesting only), plus the rest.
        .testTarget(
            name: "BrowserIdentityProviderTests",
            dependencies: ["BrowserIdentityProvider", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "CustomAPIIdentityProviderTests",
            dependencies: ["CustomAPIIdentityProvider", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "GatehouseOpenIDTests",
            dependencies: [
                "GatehouseOpenID", "GatehouseProtocol", "GatehouseTesting", "GatehouseKernel",
                // Examples/WebShop, run against Glewlwyd.
                "WebShop",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "GatehouseLoginTests",
            dependencies: [
                "GatehouseLogin", "GatehouseKernel", "GatehouseProtocol", "GatehouseTesting", "GatehouseServer",
                "GatehousePostgresTestSupport", "GatehouseOpenID", .product(name: "Logging", package: "swift-log"),
                // Phone sign-in's device side (the SDK), and passkeys' software authenticator.
                "GatehouseClient", "GatehousePlugins", "GatehouseYAML", "BrowserIdentityProvider",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The admin console against a token server with the hosted login on a loopback port: sign-in
        // refusals, sessions, forms' tokens, read-only operators, and actions through the admin service.
        .testTarget(
            name: "GatehouseAdminConsoleTests",
            dependencies: [
                "GatehouseAdminConsole", "GatehouseLogin", "GatehouseServer", "GatehouseKernel", "GatehouseProtocol",
                "GatehouseOpenID", "GatehouseClient", "GatehousePlugins", "GatehouseYAML", "GatehouseTesting",
                "GatehousePostgresTestSupport", "BrowserIdentityProvider",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // A software authenticator (P-256, Ed25519, RSA) against the relying party's checks, and a fuzzer.
        .testTarget(
            name: "GatehouseWebAuthnTests",
            dependencies: [
                "GatehouseWebAuthn", "GatehouseTesting",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PINAuthenticatorTests",
            dependencies: ["PINAuthenticator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "XignInValidatorsTests",
            dependencies: ["XignInValidators", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "BiometricAuthenticatorTests",
            dependencies: ["BiometricAuthenticator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "TOTPAuthenticatorTests",
            dependencies: ["TOTPAuthenticator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "InvitationIdentityProviderTests",
            dependencies: ["InvitationIdentityProvider", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(
            name: "PostalCodeValidatorTests",
            dependencies: ["PostalCodeValidator", "GatehouseKernel", "GatehouseTesting"]
        ),
        .testTarget(name: "GatehouseKernelTests", dependencies: ["GatehouseKernel", "GatehouseTesting"]),
        // Round trips through a real decoder (zbarimg), and the SVG and PNG checked module by module.
        .testTarget(name: "GatehouseQRCodeTests", dependencies: ["GatehouseQRCode"]),
        .testTarget(
            name: "GatehouseManifestTests",
            dependencies: ["GatehouseKernel", "GatehouseYAML", "GatehousePlugins"]
        ),
        .testTarget(
            name: "ExamplesTests",
            dependencies: [
                "ValidateInput", "gatehouse", "gatehouse-server", "XignInRegistration", "ThirdPartyAuthenticator",
                "PinLengthStore",
                "PushMobileAuth", "ResourceGateway",
                "GatehouseTesting", "GatehousePostgresTestSupport", "GatehouseClient", "GatehouseProtocol",
                "GatehousePlugins", "GatehouseYAML",
                "BiometricAuthenticator", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "XignInTests",
            dependencies: [
                "XignInManager", "XignInClient", "XignInValidators", "GatehouseServer", "GatehouseKernel",
                "GatehouseProtocol", "GatehousePlugins", "GatehouseYAML", "CustomAPIIdentityProvider",
                "GatehousePostgresTestSupport", "GatehouseClient",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "GatehouseServerTests",
            dependencies: [
                "GatehouseServer", "GatehouseClient", "GatehouseKernel", "GatehouseProtocol", "GatehousePlugins",
                "GatehouseYAML", "GatehouseTesting", "GatehousePostgresTestSupport", "CustomAPIIdentityProvider",
                "TOTPAuthenticator",
                "BiometricAuthenticator", "GatehouseLogin", "GatehouseOpenID", "BrowserIdentityProvider",
                "GatehouseResourceServer",
                "GatehouseOutbound", "XignInManager",
                // The push senders against HTTP/2 stand-ins for APNs and FCM, with a test CA.
                "GatehousePush",
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
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
