import GatehouseKernel
import GatehouseProtocol

/// Turns a server's error body back into the domain error it stands for, so callers catch the
/// same error types in-process and over HTTP.
enum WireErrors {
    /// Which operation the error answers: its own domain's codes come first.
    enum Context: Sendable {
        case flows, mobileAuthEnrollment, mobileAuthRequest
    }

    /// Every domain a server's error can name, in the order an unnamed number resolves.
    static let knownDomains: [any ErrorDomain.Type] = [
        GenericDomain.self, PinValidationDomain.self, AuthenticationDomain.self, RegistrationDomain.self,
        DeregistrationDomain.self, MobileAuthRequestDomain.self, MobileAuthEnrollmentDomain.self,
        AppToWebSingleSignOnDomain.self, ChangePinDomain.self, ResourceDomain.self,
    ]

    static func domainError(_ body: ErrorBody, status: Int, context: Context = .flows) -> any DomainError {
        let details = ErrorDetails(remainingFailureCount: body.remainingFailureCount, customInfo: body.customInfo)
        let message = body.errorDescription
        if let code = body.gatehouseCode {
            func rebuild<Domain: ErrorDomain>(_: Domain.Type) -> (any DomainError)? {
                if let plugin = body.gatehouseCodePlugin {
                    // A plugin's own code: the app knows it only by its number, name and plugin.
                    let pluginCode = GatehouseError<Domain>.Code(
                        code,
                        name: body.gatehouseCodeName ?? "code\(code)",
                        defaultMessage: message,
                        plugin: PluginTypeIdentifier(plugin)
                    )
                    return GatehouseError<Domain>(pluginCode, message: message, details: details)
                }
                return Domain.knownCodes.first { $0.rawValue == code }.map {
                    GatehouseError<Domain>($0, message: message, details: details)
                }
            }
            /// A code of `Domain` this SDK does not know (a newer server's): kept in its domain,
            /// never read as another domain's code with the same number.
            func unknown<Domain: ErrorDomain>(_: Domain.Type) -> any DomainError {
                let name = body.gatehouseCodeName ?? "code\(code)"
                return GatehouseError<Domain>(.init(code, name: name, defaultMessage: message), details: details)
            }
            if let name = body.gatehouseDomain, let domain = knownDomains.first(where: { $0.name == name }) {
                return rebuild(domain) ?? unknown(domain)
            }
            // Without a domain (older servers), numbers shared by several domains (9010) resolve
            // in this order, the operation's own first.
            let own: (any DomainError)? =
                switch context {
                case .flows: nil
                case .mobileAuthEnrollment: rebuild(MobileAuthEnrollmentDomain.self)
                case .mobileAuthRequest: rebuild(MobileAuthRequestDomain.self)
                }
            if let own { return own }
            for domain in knownDomains where body.gatehouseCodePlugin == nil {
                if let known = rebuild(domain) { return known }
            }
        }
        switch body.error {
        case "invalid_token": return AuthenticationError(.userNotAuthenticated, message: message)
        case "invalid_client": return GenericError(.deviceDeregistered, message: message)
        case "server_error", "temporarily_unavailable": return GenericError(.unknown, message: message)
        default: return GenericError(.requestInvalid, message: "\(message) (\(body.error), HTTP \(status))")
        }
    }
}
