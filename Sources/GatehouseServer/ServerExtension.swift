public import GatehouseProtocol

/// A service mounted on the token server under a path prefix, such as the XignIn manager API.
/// The server hands it every request under its prefix, whichever transport carried it.
public protocol ServerExtension: Sendable {
    /// The paths it serves start with this, e.g. `/xignin/`.
    var pathPrefix: String { get }
    /// The path of the OAuth authorization endpoint it serves, if it is a login: the server's
    /// metadata names it (RFC 8414 `authorization_endpoint`).
    var authorizationPath: String? { get }
    func handle(_ request: WireRequest) async -> WireResponse
}

extension ServerExtension {
    public var authorizationPath: String? { nil }
}
