import Foundation
import GatehouseKernel
import GatehouseServer
import Testing

@testable import GatehouseAdminConsole

@Suite("The admin console's sign-in policy, configuration and wording")
struct OperatorCheckTests {
    static let configuration = AdminConsoleConfiguration(
        loginClient: "admin-console",
        operators: [
            .init(subject: "alice@example.com", scopes: [.read, .write]),
            .init(subject: "bob@example.com", scopes: [.read]),
        ]
    )

    static func check(
        _ subject: String,
        acr: String?,
        amr: [String]?
    ) -> Result<
        AdminConsoleConfiguration.Operator, OperatorCheck.Refusal
    > {
        OperatorCheck.check(subject: subject, acr: acr, amr: amr, configuration: configuration)
    }

    @Test("a passkey or phone sign-in with mfa by an operator is admitted, with the operator's scopes")
    func admitted() {
        let passkey = Self.check(
            "alice@example.com",
            acr: AdminConsoleConfiguration.passkeyACR,
            amr: ["hwk", "user", "mfa"]
        )
        #expect((try? passkey.get())?.scopes == [.read, .write])
        let phone = Self.check("bob@example.com", acr: AdminConsoleConfiguration.phoneACR, amr: ["swk", "pin", "mfa"])
        #expect((try? phone.get())?.scopes == [.read])
    }

    @Test("refused: an acr not configured (or none), no mfa in amr (or no amr), a subject that is no operator")
    func refused() {
        #expect(
            Self.check("alice@example.com", acr: "urn:gatehouse:acr:password", amr: ["pwd", "mfa"])
                == .failure(.methodNotAccepted(acr: "urn:gatehouse:acr:password"))
        )
        #expect(Self.check("alice@example.com", acr: nil, amr: ["mfa"]) == .failure(.methodNotAccepted(acr: nil)))
        #expect(
            Self.check("alice@example.com", acr: AdminConsoleConfiguration.phoneACR, amr: ["swk"])
                == .failure(.noSecondFactor)
        )
        #expect(
            Self.check("alice@example.com", acr: AdminConsoleConfiguration.passkeyACR, amr: nil)
                == .failure(.noSecondFactor)
        )
        #expect(
            Self.check("Alice@example.com", acr: AdminConsoleConfiguration.passkeyACR, amr: ["mfa"])
                == .failure(.notAnOperator(subject: "Alice@example.com")),
            "the login's subjects are lowercased: another spelling is another subject"
        )
        // The order of the checks: the method first, so a stranger learns nothing about operators.
        #expect(
            Self.check("mallory@example.com", acr: "urn:gatehouse:acr:password", amr: ["pwd"])
                == .failure(.methodNotAccepted(acr: "urn:gatehouse:acr:password"))
        )
    }

    @Test("each refusal is said in plain words, naming the ways to sign in")
    func wording() {
        let method = OperatorCheck.explanation(.methodNotAccepted(acr: nil), configuration: Self.configuration)
        #expect(method.message.contains("sign in with a passkey or your phone"))
        let factor = OperatorCheck.explanation(.noSecondFactor, configuration: Self.configuration)
        #expect(factor.heading == "A second factor is needed")
        let stranger = OperatorCheck.explanation(
            .notAnOperator(subject: "carl@example.com"),
            configuration: Self.configuration
        )
        #expect(stranger.message.hasPrefix("carl@example.com signed in, but is not an operator"))
        #expect(OperatorCheck.methods(["a", "b", "c"]) == "a, b or c")
    }

    @Test(
        """
        the section: defaults, operators' subjects as the login keeps usernames, admin:read required, each subject \
        once, acr values checked, numbers in range
        """
    )
    func configurationSection() throws {
        func decode(_ yaml: [String: ConfigValue]) throws -> AdminConsoleConfiguration {
            try ConfigurationDecoder().decode(AdminConsoleConfiguration.self, from: .object(yaml))
        }
        func operators(_ list: [(String, [String])]) -> ConfigValue {
            .list(
                list.map { subject, scopes in
                    .object(["subject": .string(subject), "scopes": .list(scopes.map { .string($0) })])
                }
            )
        }
        let plain = try decode([
            "loginClient": .string("admin-console"),
            "operators": operators([(" Alice@Example.com ", ["admin:read", "admin:write"])]),
        ])
        #expect(plain.operators == [.init(subject: "alice@example.com", scopes: [.read, .write])])
        #expect(plain.acrValues == [AdminConsoleConfiguration.passkeyACR, AdminConsoleConfiguration.phoneACR])
        #expect(plain.idleTimeout == 900 && plain.sessionLifetime == 28800 && plain.maxAuthenticationAge == 300)
        #expect(plain.auditPageSize == 50)

        #expect(throws: (any Error).self) {
            try decode(["loginClient": .string("c"), "operators": operators([("a@example.com", ["admin:write"])])])
        }
        #expect(throws: (any Error).self) {
            try decode([
                "loginClient": .string("c"),
                "operators": operators([("a@example.com", ["admin:read"]), ("A@example.com", ["admin:read"])]),
            ])
        }
        #expect(throws: (any Error).self) { try decode(["loginClient": .string("c"), "operators": .list([])]) }
        #expect(throws: (any Error).self) {
            try decode([
                "loginClient": .string("c"), "operators": operators([("a@example.com", ["admin:read"])]),
                "acrValues": .list([.string("two words")]),
            ])
        }
        #expect(throws: (any Error).self) {
            try decode([
                "loginClient": .string("c"), "operators": operators([("a@example.com", ["admin:read"])]),
                "idleTimeout": .integer(10),
            ])
        }
        #expect(throws: (any Error).self) {
            try decode([
                "loginClient": .string("c"), "operators": operators([("a@example.com", ["admin:everything"])]),
            ])
        }
    }

    @Test("times are shown and read in UTC; the next page after signing in is a console page only")
    func timesAndPaths() {
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(ConsoleText.time(date) == "2027-01-15 08:00:00 UTC")
        #expect(ConsoleText.parseUTC("2027-01-15T08:00") == date)
        #expect(ConsoleText.parseUTC("2027-01-15T08:00:00") == date)
        #expect(ConsoleText.parseUTC("2027-01-15") == Date(timeIntervalSince1970: 1_800_000_000 - 8 * 3600))
        #expect(ConsoleText.parseUTC("15/01/2027") == nil && ConsoleText.parseUTC("") == nil)
        #expect(ConsoleText.field(date) == "2027-01-15T08:00")
        #expect(ConsoleText.actor("operator:alice@example.com") == "alice@example.com (operator)")
        #expect(ConsoleText.actor("admin_client:helpdesk") == "helpdesk (admin API)")

        #expect(AdminConsole.consolePath("/admin/user?subject=a") == "/admin/user?subject=a")
        for elsewhere in [
            "https://evil.example/admin/", "//evil.example/admin/", "/admin//evil", "/login/", "/admin/sign-in",
        ] {
            #expect(AdminConsole.consolePath(elsewhere) == nil, "\(elsewhere)")
        }
    }
}
