import GatehouseServer

/// Whether a sign-in at the hosted login opens the console: the ID token (already verified by
/// the relying party: signature, issuer, audience, nonce, age) must say one of the configured
/// `acr` values, a second factor in `amr` (`mfa`, RFC 8176), and name an operator. Pure, so each
/// refusal is tested without a login.
enum OperatorCheck {
    /// Why a sign-in does not open the console.
    enum Refusal: Error, Equatable {
        /// The sign-in's `acr` is not one the console accepts (nil: the token named none).
        case methodNotAccepted(acr: String?)
        /// The sign-in used one factor: `amr` does not say `mfa`.
        case noSecondFactor
        /// The user is not an operator.
        case notAnOperator(subject: String)
    }

    /// The operator the sign-in proves, or why it does not.
    static func check(
        subject: String,
        acr: String?,
        amr: [String]?,
        configuration: AdminConsoleConfiguration
    ) -> Result<AdminConsoleConfiguration.Operator, Refusal> {
        guard let acr, configuration.acrValues.contains(acr) else { return .failure(.methodNotAccepted(acr: acr)) }
        guard amr?.contains("mfa") == true else { return .failure(.noSecondFactor) }
        guard let found = configuration.operator(subject) else { return .failure(.notAnOperator(subject: subject)) }
        return .success(found)
    }

    /// The refusal page's heading and sentence, in plain words.
    static func explanation(
        _ refusal: Refusal,
        configuration: AdminConsoleConfiguration
    ) -> (heading: String, message: String) {
        switch refusal {
        case .methodNotAccepted:
            return (
                "Sign in another way",
                "The admin console needs you to sign in with \(methods(configuration.acrValues)). "
                    + "The way you signed in is not one of them. Sign in again and choose one of those."
            )
        case .noSecondFactor:
            return (
                "A second factor is needed",
                "The admin console needs a sign-in with a second factor, such as a passkey with your screen lock "
                    + "or your phone with its PIN. Your sign-in did not use one. Sign in again with a second factor."
            )
        case .notAnOperator(let subject):
            return (
                "Not an operator",
                "\(subject) signed in, but is not an operator of this admin console. "
                    + "Ask the people who run this server to add you to the console's operators."
            )
        }
    }

    /// `acr` values as a helpdesk would say them: "a passkey or your phone".
    static func methods(_ acrValues: [String]) -> String {
        let named = acrValues.map { acr in
            switch acr {
            case AdminConsoleConfiguration.passkeyACR: "a passkey"
            case AdminConsoleConfiguration.phoneACR: "your phone"
            default: acr
            }
        }
        guard named.count > 1, let last = named.last else { return named.first ?? "" }
        return named.dropLast().joined(separator: ", ") + " or " + last
    }
}
