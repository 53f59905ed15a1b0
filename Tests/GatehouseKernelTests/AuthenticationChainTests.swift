import Foundation
import GatehouseKernel
import Testing

private let request = VerificationRequest(
    subject: "user-1",
    profile: UserProfile(id: "abc123"),
    message: Data(),
    now: Date()
)
private let wrongPin = AuthenticationFailure(AuthenticationError(.invalidPin), countsAsAttempt: true)

@Suite("Authentication chain")
struct AuthenticationChainTests {
    @Test("skips verifiers that are not applicable and stops at the first success")
    func firstSuccessWins() async {
        let skip = FixedVerifier("skip", .outcome(.notApplicable))
        let accept = FixedVerifier("accept", .outcome(.success(AuthenticationSuccess(info: CustomInfo(status: 2000)))))
        let later = FixedVerifier("later", .outcome(.success(AuthenticationSuccess())))
        let decision = await AuthenticationChain([skip, accept, later]).verify(request)
        guard case .authenticated(let by, let success) = decision else {
            Issue.record("expected success, got \(decision)")
            return
        }
        #expect(by.id == "accept")
        #expect(success.info == CustomInfo(status: 2000))
        #expect(later.callCount == 0)
    }

    @Test("a failure stops the chain and its reason reaches the caller")
    func failureStops() async {
        let refuse = FixedVerifier("refuse", .outcome(.failure(wrongPin)))
        let accept = FixedVerifier("accept", .outcome(.success(AuthenticationSuccess())))
        let decision = await AuthenticationChain([refuse, accept]).verify(request)
        guard case .refused(let failure) = decision else {
            Issue.record("expected a refusal, got \(decision)")
            return
        }
        #expect(failure.error.code == .invalidPin)
        #expect(failure.countsAsAttempt)
        #expect(accept.callCount == 0)
    }

    @Test("a verifier that throws is a refusal, never a pass")
    func throwingFailsClosed() async {
        let broken = FixedVerifier("broken", .throwing)
        let accept = FixedVerifier("accept", .outcome(.success(AuthenticationSuccess())))
        let decision = await AuthenticationChain([broken, accept]).verify(request)
        guard case .refused(let failure) = decision else {
            Issue.record("expected a refusal, got \(decision)")
            return
        }
        #expect(failure.error.code == .authenticatorInvalid)
        #expect(failure.error.plugin == "test.fixed")
        #expect(accept.callCount == 0)
    }

    @Test("refuses when no verifier applies, or there is none")
    func refusesWhenNothingApplies() async {
        for chain in [AuthenticationChain([FixedVerifier("skip", .outcome(.notApplicable))]), AuthenticationChain([])] {
            guard case .refused(let failure) = await chain.verify(request) else {
                Issue.record("expected a refusal")
                continue
            }
            #expect(failure.error.code == .noApplicableAuthenticator)
            #expect(!failure.countsAsAttempt)
        }
    }

    @Test("passes a challenge on")
    func passesChallenge() async {
        let challenge = AuthenticatorChallenge(payload: Data([1]), session: Data([2]))
        let decision = await AuthenticationChain([FixedVerifier("pin", .outcome(.challenge(challenge)))]).verify(
            request
        )
        guard case .challenged(let by, let issued) = decision else {
            Issue.record("expected a challenge, got \(decision)")
            return
        }
        #expect(by.id == "pin")
        #expect(issued == challenge)
    }
}
