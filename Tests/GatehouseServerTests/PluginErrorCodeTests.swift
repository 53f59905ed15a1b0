import Foundation
import GatehouseKernel
import GatehouseProtocol
import Testing

@testable import GatehouseClient
@testable import GatehouseServer

@Suite("Error codes over HTTP")
struct PluginErrorCodeTests {
    /// The server's error body for `error`, read back as the SDK reads it.
    private func roundTrip(_ error: any DomainError) throws -> (status: Int, error: any DomainError) {
        let response = ServerError(error).response
        let body = try WireCoding.decode(ErrorBody.self, from: response.body)
        return (response.status, WireErrors.domainError(body, status: response.status))
    }

    @Test("a plugin's code reaches the app as that plugin's code, even with a number Gatehouse uses")
    func pluginCode() throws {
        let code = AuthenticationError.Code(
            9009,
            name: "voiceNotRecognised",
            defaultMessage: "The voice was not recognised.",
            plugin: "acme.voice"
        )
        let (status, received) = try roundTrip(AuthenticationError(code))
        #expect(status == 400)
        let rebuilt = try #require(received as? AuthenticationError)
        #expect(rebuilt.code == code)
        #expect(rebuilt.code != .invalidPin)
        #expect(rebuilt.code.name == "voiceNotRecognised")
        #expect(rebuilt.message == "The voice was not recognised.")
        // The same number and plugin in another domain is not this code's domain.
        let (_, other) = try roundTrip(RegistrationError(.init(19001, name: "x", defaultMessage: "x.", plugin: "acme")))
        #expect(other is RegistrationError)
    }

    @Test("a code the SDK does not know stays in the domain the server named: a newer 9003 is no deregistration")
    func unknownCodeOfNamedDomain() {
        let body = ErrorBody(
            error: "invalid_grant",
            errorDescription: "Something newer.",
            gatehouseCode: GenericError.Code.userDeregistered.rawValue,
            gatehouseDomain: RegistrationDomain.name,
            gatehouseCodeName: "somethingNewer"
        )
        let error = WireErrors.domainError(body, status: 400)
        #expect(error is RegistrationError)
        #expect(!(error is GenericError))
        #expect(error.codeName == "somethingNewer")
    }

    @Test("a number several domains use resolves to the domain the server named")
    func sharedNumbers() throws {
        let (_, mobile) = try roundTrip(MobileAuthRequestError(.userNotAuthenticated))
        #expect((mobile as? MobileAuthRequestError)?.code == .userNotAuthenticated)
        let (_, sso) = try roundTrip(AppToWebSingleSignOnError(.userNotAuthenticated))
        #expect(sso is AppToWebSingleSignOnError)
        let (status, unavailable) = try roundTrip(AuthenticationError(.authenticatorUnavailable))
        #expect(status == 503 && (unavailable as? AuthenticationError)?.code == .authenticatorUnavailable)
    }
}
