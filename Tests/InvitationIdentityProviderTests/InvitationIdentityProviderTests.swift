import Foundation
import GatehouseKernel
import GatehouseTesting
import InvitationIdentityProvider
import Synchronization
import Testing

/// Invitations for Ann, as an operator lists them (more than the suite uses); every registration
/// takes an unused one.
private final class Invitations: Sendable {
    let codes = (1...64).map { "ANN-\($0)-" + UUID().uuidString.prefix(8) }
    private let taken = Mutex(0)
    var config: [String: ConfigValue] {
        ["invitations": .object(.init(uniqueKeysWithValues: codes.map { ($0, "ann") }))]
    }
    func next() -> String {
        taken.withLock { index in
            defer { index += 1 }
            return codes[index % codes.count]
        }
    }
}

@Suite("Invitation identity provider example")
struct InvitationIdentityProviderTests {
    @Test("passes the identity provider conformance suite")
    func conformance() async throws {
        let invitations = Invitations()
        let report = try await IdentityProviderConformance(
            InvitationIdentityProviderPlugin.self,
            config: invitations.config,
            register: .scripted { [.customRegistration(.data(invitations.next()))] },
            refused: .scripted { [.customRegistration(.data("NOT-AN-INVITATION"))] }
        ).run()
        // The code is the whole message: there is no session to tell two registrations apart.
        #expect(report.skipped.count == 1 && report.skipped[0].hasPrefix("a registration handed another"), "\(report)")
    }

    @Test("a code registers its user once; used again, it is refused and revokes what its first use opened")
    func singleUse() async throws {
        let invitations = Invitations()
        let code = invitations.next()
        let idp = try IdentityProviderHarness(
            PluginHarness.identityProvider(InvitationIdentityProviderPlugin.self, config: invitations.config)
        )
        _ = try await idp.register(responder: ScriptedResponder([.customRegistration(.data(" \(code) "))]))
        let opened = try #require(await idp.identity)
        #expect(opened.subject == "ann")
        let refused = await #expect(throws: RegistrationError.self) {
            try await idp.register(responder: ScriptedResponder([.customRegistration(.data(code))]))
        }
        #expect(refused?.code == .invitationNotValid)
        #expect(await idp.identity == nil)
        #expect(await idp.revokedSubjects == ["ann"])
        #expect(await idp.revokedGrants == [opened.grant].compactMap { $0 })
    }

    @Test("configuration: the server needs a code of 8 characters or more; the app's half needs none")
    func configuration() throws {
        let plugin = InvitationIdentityProviderPlugin.self
        #expect(
            PluginHarness.configurationProblem(plugin, config: [:], environment: .testing())
                == "config.invitations: give at least one invitation code"
        )
        #expect(
            PluginHarness.configurationProblem(
                plugin,
                config: ["invitations": ["SHORT": "ann"]],
                environment: .testing()
            )
                == #"config.invitations: the code "SHORT" is shorter than 8 characters"#
        )
        let published = try ConfigurationDecoder().decode(plugin.Configuration.self, from: [:])
        #expect(published.invitations.isEmpty)
    }
}
