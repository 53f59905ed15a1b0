/// The paths of the token server's endpoints.
public enum Endpoint {
    public static let health = "/health"
    public static let configuration = "/v1/configuration"
    public static let clients = "/v1/clients"
    public static let registration = "/v1/registration"
    public static let authentication = "/v1/authentication"
    public static let changePin = "/v1/pin/change"
    public static let flowPrefix = "/v1/flows/"
    public static let token = "/v1/token"
    public static let revoke = "/v1/revoke"
    public static let deregister = "/v1/deregister"
    public static let profileResource = "/v1/resource/profile"
    public static let authenticators = "/v1/authenticators"
    public static let authenticatorRegistration = "/v1/authenticators/register"
    public static let authenticatorDeregistration = "/v1/authenticators/deregister"

    public static func flow(_ id: String) -> String { flowPrefix + id }

    /// Every path the token server serves, flows as their template.
    public static let all: [String] = [
        health, configuration, clients, registration, authentication, changePin, flowPrefix + "{flowID}", token, revoke,
        deregister, profileResource, authenticators, authenticatorRegistration, authenticatorDeregistration,
    ]
}
