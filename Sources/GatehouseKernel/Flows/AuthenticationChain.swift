/// Runs server halves in order until one decides, and refuses when none succeeds.
///
/// As with hummingbird-auth's authenticators, `.notApplicable` means "not mine, ask the next one"
/// and a failure stops the chain: a verifier that recognised the proof and refused it is never
/// overruled by a later one. Fail closed: a verifier that throws counts as a failure, and the chain
/// never turns "nothing objected" into success. The reason for a refusal reaches the caller: the
/// failure a verifier reported, or `noApplicableAuthenticator` when every verifier declined.
public struct AuthenticationChain: Sendable {
    public let verifiers: [any AuthenticatorVerifier]

    public init(_ verifiers: [any AuthenticatorVerifier]) { self.verifiers = verifiers }

    /// What the chain decided.
    public enum Decision: Sendable {
        case authenticated(by: AuthenticatorDescriptor, AuthenticationSuccess)
        case challenged(by: AuthenticatorDescriptor, AuthenticatorChallenge)
        case refused(AuthenticationFailure)
    }

    public func verify(_ request: VerificationRequest) async -> Decision {
        for verifier in verifiers {
            let outcome: AuthenticationOutcome
            do {
                outcome = try await verifier.verify(request)
            } catch let failure as AuthenticationFailure {
                outcome = .failure(failure)
            } catch let error as AuthenticationError {
                outcome = .failure(AuthenticationFailure(error, countsAsAttempt: false))
            } catch {
                outcome = .failure(
                    AuthenticationFailure(
                        AuthenticationError(
                            .authenticatorInvalid,
                            message: "The \(verifier.descriptor.type) authenticator failed: \(error)",
                            plugin: verifier.descriptor.type
                        ),
                        countsAsAttempt: false
                    )
                )
            }
            switch outcome {
            case .success(let success):
                return .authenticated(by: verifier.descriptor, success)
            case .challenge(let challenge):
                return .challenged(by: verifier.descriptor, challenge)
            case .failure(let failure):
                return .refused(failure)
            case .notApplicable:
                continue
            }
        }
        return .refused(AuthenticationFailure(AuthenticationError(.noApplicableAuthenticator), countsAsAttempt: false))
    }
}
