import Crypto
import Foundation
import GatehouseKernel
import GatehouseOpenID
import GatehouseProtocol
import GatehouseServer
import Logging
import Synchronization

/// The OpenID Connect parameters of an authorization request (Core 1.0 §3.1.2.1), read and
/// checked. What the provider does not offer is refused by name rather than ignored, so a client
/// never believes a request object or a response mode was honoured.
struct OpenIDParameters: Sendable {
    enum Prompt: String, Sendable { case none, login, consent }

    /// Why the request is refused: an OAuth error code and a sentence for the client.
    struct Refusal: Error, Sendable {
        var error: String
        var description: String
    }

    var nonce: String?
    var prompt: Set<Prompt> = []
    var maxAge: Int?
    var loginHint: String?
    var idTokenHint: String?
    /// `acr_values`, most preferred first: the sign-in must produce one of them (the login treats
    /// them as required, and answers `unmet_authentication_requirements` when it cannot).
    var acrValues: [String] = []

    static func read(_ query: FormFields) -> Result<OpenIDParameters, Refusal> {
        func refusal(_ error: String, _ description: String) -> Result<OpenIDParameters, Refusal> {
            .failure(Refusal(error: error, description: description))
        }
        if query["request"] != nil { return refusal("request_not_supported", "Request objects are not supported.") }
        if query["request_uri"] != nil {
            return refusal("request_uri_not_supported", "request_uri is not supported.")
        }
        if query["registration"] != nil {
            return refusal("registration_not_supported", "Registration parameters are not supported.")
        }
        if let mode = query["response_mode"], mode != "query" {
            return refusal("invalid_request", "The only response_mode is query.")
        }
        var parameters = OpenIDParameters()
        if let nonce = query["nonce"] {
            guard (1...512).contains(nonce.utf8.count), nonce.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
                return refusal("invalid_request", "A nonce is 1 to 512 printable ASCII characters.")
            }
            parameters.nonce = nonce
        }
        if let prompt = query["prompt"] {
            for value in prompt.split(separator: " ") {
                guard let known = Prompt(rawValue: String(value)) else {
                    return refusal("invalid_request", "prompt takes none, login and consent.")
                }
                parameters.prompt.insert(known)
            }
            if parameters.prompt.contains(.none), parameters.prompt.count > 1 {
                return refusal("invalid_request", "prompt=none cannot be combined with other values.")
            }
        }
        if let maxAge = query["max_age"] {
            guard (1...9).contains(maxAge.utf8.count), maxAge.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                let seconds = Int(maxAge)
            else { return refusal("invalid_request", "max_age is a number of seconds.") }
            parameters.maxAge = seconds
        }
        if let hint = query["login_hint"] {
            guard hint.utf8.count <= 254,
                !hint.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else { return refusal("invalid_request", "login_hint is at most 254 characters.") }
            parameters.loginHint = hint
        }
        if let hint = query["id_token_hint"] {
            guard hint.utf8.count <= JSONWebSignature.maxLength else {
                return refusal("invalid_request", "The id_token_hint is too long.")
            }
            parameters.idTokenHint = hint
        }
        if let values = query["acr_values"] {
            let listed = values.split(separator: " ").map(String.init)
            guard (1...8).contains(listed.count),
                listed.allSatisfy({
                    (1...128).contains($0.utf8.count) && $0.utf8.allSatisfy { (0x21...0x7E).contains($0) }
                })
            else { return refusal("invalid_request", "acr_values lists 1 to 8 values of printable ASCII.") }
            parameters.acrValues = listed
        }
        return .success(parameters)
    }
}
