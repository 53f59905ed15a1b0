import Crypto
import Foundation
import GatehouseKernel
import GatehouseProtocol
import Synchronization
import Testing
import XignInClient
import XignInManager
import XignInValidators

@Suite("XignIn registration", .serialized)
struct XignInRegistrationTests {
    @Test("initialization returns the manager's specification, categories and required attributes")
    func initialization() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "keycloak")
            #expect(parameters.managerURL.absoluteString == "https://manager.example/xignin")
            #expect(parameters.serviceMappingID == "keycloak")
            #expect(parameters.pinSpec.minLength == 5)
            #expect(parameters.pinSpec.maxLength == 8)
            #expect(parameters.validatorAlias.maxLength == 20)
            #expect(parameters.categories.map(\.id) == ["email", "idCard"])
            #expect(parameters.categories[0].types == [.email])
            #expect(parameters.categories[0].info.email.isRequired)
            #expect(!parameters.categories[0].info.firstName.isRequired)
            #expect(
                parameters.categories[1].identificationAttributes == [.firstName, .lastName, .birthdate, .placeOfBirth]
            )
            let unmapped = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "nobody")
            #expect(unmapped.serviceMappingID == nil)
        }
    }

    @Test("register, then activate with the e-mailed code and the PIN; the manager is listed")
    func registerAndActivate() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            guard
                case .success(let managerURL) = try await fixture.registry.register(
                    data: filled(parameters, email: "Jane@Example.com")
                )
            else {
                Issue.record("the registration was refused")
                return
            }
            #expect(managerURL.absoluteString == "https://manager.example/xignin")
            let code = try fixture.activationCode(for: "jane@example.com")
            do {
                _ = try await fixture.registry.activate(url: fixture.url, code: code, pin: "13579")
                Issue.record("a wrong activation PIN was accepted")
            } catch let error as AuthenticationError {
                #expect(error.code == .invalidPin)
                #expect(error.details.remainingFailureCount == 2)
            }
            let entity = try await fixture.registry.activate(url: fixture.url, code: code.lowercased(), pin: "24680")
            #expect(entity.alias == "Activation 1")
            #expect(entity.managerURL == "https://manager.example/xignin")
            #expect(try await fixture.registry.identityManagers() == [entity])
            // A used code cannot activate again.
            do {
                _ = try await fixture.registry.activate(url: fixture.url, code: code, pin: "24680")
                Issue.record("a used code activated again")
            } catch let error as RegistrationError {
                #expect(error.code == .invalidActivationCode)
            }
        }
    }

    @Test("too many wrong activation PINs lock the code")
    func activationLockout() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            _ = try await fixture.registry.register(data: filled(parameters, email: "lock@example.com"))
            let code = try fixture.activationCode(for: "lock@example.com")
            var outcomes: [String] = []
            for _ in 0..<4 {
                do {
                    _ = try await fixture.registry.activate(url: fixture.url, code: code, pin: "11111")
                    outcomes.append("activated")
                } catch let error as any DomainError {
                    outcomes.append("\(error.codeName):\(error.details.remainingFailureCount.map(String.init) ?? "-")")
                }
            }
            #expect(outcomes == ["invalidPin:2", "invalidPin:1", "invalidActivationCode:-", "invalidActivationCode:-"])
            do {
                _ = try await fixture.registry.activate(url: fixture.url, code: code, pin: "24680")
                Issue.record("a locked code activated")
            } catch let error as RegistrationError {
                #expect(error.code == .invalidActivationCode)
            }
        }
    }

    @Test(
        "the manager refuses per field: required missing, invalid, e-mail in use or blocked; the app corrects and retries"
    )
    func perFieldErrors() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            _ = try await fixture.registry.register(data: filled(parameters, email: "taken@example.com"))

            // E-mail already in use.
            guard
                case .failure(var refused) = try await fixture.registry.register(
                    data: filled(parameters, email: "TAKEN@example.com")
                )
            else {
                Issue.record("a duplicate e-mail was accepted")
                return
            }
            #expect(refused.selection?.info.email.error == .notAvailable)
            // Blocked domain.
            guard
                case .failure(let blocked) = try await fixture.registry.register(
                    data: filled(parameters, email: "x@blocked.example")
                )
            else {
                Issue.record("a blocked domain was accepted")
                return
            }
            #expect(blocked.selection?.info.email.error == .notAvailable)
            // Required attributes of the identity-card category, missing.
            var idCard = parameters
            _ = idCard.pinSpec.setPin("24680")
            _ = idCard.setSelection(idCard.categories[1])
            _ = idCard.selection?.info.firstName.setValue(value: "Jane")
            guard case .failure(let missing) = try await fixture.registry.register(data: idCard) else {
                Issue.record("missing required attributes were accepted")
                return
            }
            #expect(missing.selection?.info.lastName.error == .required)
            #expect(missing.selection?.info.birthdate.error == .required)
            #expect(missing.selection?.info.placeOfBirth.error == .required)
            #expect(missing.selection?.info.firstName.error == AttributeError.none)

            // Correct and retry.
            _ = refused.selection?.info.email.setValue(value: "free@example.com")
            #expect(refused.selection?.info.email.error == AttributeError.none)
            guard case .success = try await fixture.registry.register(data: refused) else {
                Issue.record("the corrected registration was refused")
                return
            }
            #expect(try await fixture.count("accounts") == 2)
        }
    }

    @Test("a registration refused only for its alias marks the alias, no attribute; correcting it clears the mark")
    func aliasRefusalMarked() async throws {
        try await withXignIn { fixture in
            let fetched = try await fixture.registry.initialization(url: fixture.url)
            // A client whose alias rules are looser than the manager's (2 to 20 characters): only
            // the manager's verdict can tell the user what is wrong.
            let stale = RegistrationParameters(
                managerURL: fetched.managerURL,
                endpoint: fetched.endpoint,
                serviceMappingID: nil,
                pinSpec: fetched.pinSpec,
                validatorAlias: AliasValidator(minLength: 1, maxLength: 100),
                categories: fetched.categories
            )
            let refusals: [(String, AliasValidator.ResultCode)] = [
                ("x", .tooShort), (String(repeating: "a", count: 30), .tooLong),
            ]
            for (alias, expected) in refusals {
                let sent = filled(stale, email: "alias@example.com", alias: alias)
                #expect(sent.alias == alias)
                guard case .failure(var refused) = try await fixture.registry.register(data: sent) else {
                    Issue.record("the manager accepted the alias \(alias)")
                    return
                }
                #expect(refused.aliasError == expected)
                for attribute in PersonalAttribute.allCases {
                    #expect(refused.selection?.info.error(of: attribute) == AttributeError.none)
                }
                #expect(refused.setAlias("Work phone") == .valid)
                #expect(refused.aliasError == nil)
                if expected == .tooLong {
                    guard case .success = try await fixture.registry.register(data: refused) else {
                        Issue.record("the corrected registration was refused")
                        return
                    }
                }
            }
            #expect(try await fixture.count("accounts") == 1)
        }
    }

    @Test("every check is made again on the manager, whatever the client sent")
    func serverRechecks() async throws {
        try await withXignIn { fixture in
            let before = try await fixture.snapshot()
            let publicKey = P256.Signing.PrivateKey().publicKey.x963Representation.base64URLEncodedString
            let key = "\"pin_token\": \"x\", \"pin_public_key\": \"\(publicKey)\""
            let cases: [(String, Int, String)] = [
                (#"{"category": "email", "attributes": {"email": "not an address"}, \#(key)}"#, 422, "email invalid"),
                (#"{"category": "email", "attributes": {}, \#(key)}"#, 422, "email required"),
                (
                    #"{"category": "email", "attributes": {"email": "a@b.de"}, "alias": "x", \#(key)}"#, 422,
                    "alias tooShort"
                ),
                (
                    #"{"category": "email", "attributes": {"email": "a@b.de"}, "alias": "Hi\r\nBcc: x@evil.io", \#(key)}"#,
                    422, "alias invalid"
                ),
                (
                    #"{"category": "passport", "attributes": {}, \#(key)}"#, 400,
                    "There is no category \"passport\"; the manager offers: email, idCard."
                ),
                (
                    #"{"category": "email", "attributes": {"shoeSize": "44"}, \#(key)}"#, 400,
                    "There is no attribute \"shoeSize\""
                ),
                (
                    #"{"category": "email", "attributes": {"email": "\#(String(repeating: "a", count: 2000))@b.de"}, \#(key)}"#,
                    400,
                    "longer than 1024 characters"
                ),
                (
                    #"{"category": "email", "attributes": {"email": 5}, \#(key)}"#, 400,
                    "Invalid field attributes.email: expected a string, found 5."
                ),
                (#"{"category": "email""#, 400, "The body is not valid JSON"),
                (
                    #"{"category": "email", "attributes": {"email": "a@b.de"}, "pin_token": "x", "pin_public_key": "AAAA"}"#,
                    400, "not a P-256 key"
                ),
                (#"{"category": "email", "attributes": {"email": "a@b.de"}, \#(key)}"#, 400, "evaluate it again"),
            ]
            for (body, status, message) in cases {
                let response = try await fixture.send("POST", "/xignin/v1/registrations", body: body)
                #expect(response.status == status, "\(body)")
                let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
                let description = object?["error_description"] as? String ?? ""
                #expect(description.contains(message), "\(description)")
            }
            let oversized = try await fixture.send(
                "POST",
                "/xignin/v1/registrations",
                body: String(repeating: " ", count: 70000) + "{}"
            )
            #expect(oversized.status == 413)
            let wrongType = try await fixture.send(
                "POST",
                "/xignin/v1/registrations",
                body: "{}",
                contentType: "text/plain"
            )
            #expect(wrongType.status == 415)
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test("an alias is kept when given, and generated as \"Activation 1\" when not")
    func aliases() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            _ = try await fixture.registry.register(
                data: filled(parameters, email: "named@example.com", alias: "Work phone")
            )
            let named = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "named@example.com"),
                pin: "24680"
            )
            #expect(named.alias == "Work phone")
            _ = try await fixture.registry.register(data: filled(parameters, email: "plain@example.com"))
            #expect(
                try String(
                    contentsOf: fixture.outbox.appendingPathComponent(
                        try FileManager.default.contentsOfDirectory(atPath: fixture.outbox.path).sorted().last ?? ""
                    ),
                    encoding: .utf8
                )
                .contains("Subject: Activate ")
            )
            let plain = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "plain@example.com"),
                pin: "24680"
            )
            #expect(plain.alias == "Activation 1")
        }
    }

    @Test("a subject beyond ASCII is RFC 2047 encoded-words, and a line break never reaches a header")
    func mailHeaders() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            _ = try await fixture.registry.register(
                data: filled(parameters, email: "zoe@example.com", alias: "Zoë's 📱")
            )
            let newest = try FileManager.default.contentsOfDirectory(atPath: fixture.outbox.path).sorted().last ?? ""
            let mail = try String(contentsOf: fixture.outbox.appendingPathComponent(newest), encoding: .utf8)
            let subject = try #require(mail.components(separatedBy: "\r\n").first { $0.hasPrefix("Subject: ") })
            #expect(subject.unicodeScalars.allSatisfy { (0x20...0x7E).contains($0.value) })
            let words = subject.dropFirst("Subject: ".count).split(separator: " ")
            let decoded = words.compactMap { word -> String? in
                guard word.hasPrefix("=?UTF-8?B?"), word.hasSuffix("?=") else { return nil }
                return Data(base64Encoded: String(word.dropFirst(10).dropLast(2))).map {
                    String(decoding: $0, as: UTF8.self)
                }
            }
            #expect(decoded.joined() == "Activate Zoë's 📱")

            let outbox = OutboxMailSender(directory: fixture.directory.appendingPathComponent("guarded"))
            let injected = ActivationMail(
                to: "zoe@example.com",
                alias: "Hi\r\nBcc: x@evil.io",
                activationCode: "123456",
                managerURL: fixture.url.absoluteString
            )
            await #expect(throws: (any Error).self) { try await outbox.send(injected) }
            let guarded = fixture.directory.appendingPathComponent("guarded").path
            let written = (try? FileManager.default.contentsOfDirectory(atPath: guarded)) ?? []
            #expect(written.isEmpty)
        }
    }

    @Test("arbitrary attributes: kept with a valid mapping, delivered at the first activation, then deleted")
    func arbitraryAttributesDelivered() async throws {
        try await withXignIn { fixture in
            var parameters = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "keycloak")
            parameters.setArbitraryUserAttributes(["team": "blue", "role": "admin"])
            _ = try await fixture.registry.register(data: filled(parameters, email: "kc@example.com"))
            #expect(try await fixture.count("pending_attributes") == 1)
            _ = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "kc@example.com"),
                pin: "24680"
            )
            let delivered = fixture.deliveries.received.withLock { $0 }
            #expect(delivered.count == 1)
            #expect(delivered.first?.attributes == ["team": "blue", "role": "admin"])
            #expect(delivered.first?.serviceMappingID == "keycloak")
            #expect(delivered.first?.email == "kc@example.com")
            #expect(try await fixture.count("pending_attributes") == 0)
        }
    }

    @Test("arbitrary attributes are deleted even when the linked service refuses them")
    func arbitraryAttributesRefused() async throws {
        try await withXignIn(linkedServiceAccepts: false) { fixture in
            var parameters = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "keycloak")
            parameters.setArbitraryUserAttributes(["team": "red"])
            _ = try await fixture.registry.register(data: filled(parameters, email: "no@example.com"))
            _ = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "no@example.com"),
                pin: "24680"
            )
            #expect(fixture.deliveries.received.withLock { $0.count } == 1)
            #expect(try await fixture.count("pending_attributes") == 0)
        }
    }

    @Test("arbitrary attributes without a valid service mapping are silently discarded")
    func arbitraryAttributesDiscarded() async throws {
        try await withXignIn { fixture in
            var parameters = try await fixture.registry.initialization(url: fixture.url, serviceMappingId: "unknown")
            parameters.setArbitraryUserAttributes(["team": "green"])
            guard
                case .success = try await fixture.registry.register(data: filled(parameters, email: "drop@example.com"))
            else {
                Issue.record("the registration was refused")
                return
            }
            #expect(try await fixture.count("pending_attributes") == 0)
            _ = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "drop@example.com"),
                pin: "24680"
            )
            #expect(fixture.deliveries.received.withLock { $0.isEmpty })
        }
    }

    @Test("two concurrent registrations with the same e-mail: exactly one succeeds")
    func concurrentSameEmail() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            let data = filled(parameters, email: "race@example.com")
            let registry = fixture.registry
            async let first = registry.register(data: data)
            async let second = registry.register(data: data)
            let outcomes = try await [first, second]
            let successes = outcomes.filter { if case .success = $0 { true } else { false } }
            #expect(successes.count == 1)
            #expect(try await fixture.count("accounts") == 1)
        }
    }

    @Test("a manager whose registration a third party manages says so clearly")
    func thirdParty() async throws {
        try await withXignIn(registration: "thirdParty") { fixture in
            do {
                _ = try await fixture.registry.initialization(url: fixture.url)
                Issue.record("initialization worked at a third-party-managed manager")
            } catch let error as RegistrationError {
                #expect(error.code == .registrationUnavailable)
                #expect(error.message == "Registration at this manager is managed by Servicekonto.NRW; register there.")
            }
            let direct = try await fixture.send("POST", "/xignin/v1/registrations", body: "{}")
            #expect(direct.status == 403)
        }
    }

    @Test("the activation PIN never reaches the manager")
    func pinNeverSent() async throws {
        try await withXignIn { fixture in
            let parameters = try await fixture.registry.initialization(url: fixture.url)
            _ = try await fixture.registry.register(data: filled(parameters, email: "pin@example.com", pin: "97531"))
            _ = try await fixture.registry.activate(
                url: fixture.url,
                code: try fixture.activationCode(for: "pin@example.com"),
                pin: "97531"
            )
            let stored = try await fixture.storedBytes()
            // The reader sees what the manager keeps (one that saw nothing would pass too).
            #expect(stored.range(of: Data("pin@example.com".utf8)) != nil)
            #expect(stored.range(of: Data("97531".utf8)) == nil)
            #expect(stored.range(of: Data([9, 7, 5, 3, 1])) == nil)
        }
    }
}
