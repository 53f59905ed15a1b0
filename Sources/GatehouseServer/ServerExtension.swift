public import GatehouseProtocol

/// A service mounted on the token server under a path prefix, such as the XignIn manager API.
/// The server hands it every request under its prefix, whichever transport carried it.
public protocol ServerExtension: Sendable {
    /// The paths it serves start with this, e.g. `/xignin/`.
    var pathPrefix: String { get }
    func handle(_ request: WireRequest) async -> WireResponse
}
