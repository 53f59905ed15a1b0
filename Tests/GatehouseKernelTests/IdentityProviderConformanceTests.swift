import Foundation
import GatehouseKernel
import GatehouseTesting
import Synchronization
import Testing

/// Single-use codes, each naming a user: what the test provider's server half checks.
private final class CodeBook: Sendable {
    enum Entry {
        case unknown
        case unused(String)
        case used(String)
    }
    private let entries = Mutex<[String: (user: String, used: Bool)]>([:])

    func issue(for user: String) -> String {
        let code = UUID().uuidString
        entries.withLock { $0[code] = (user, false) }
        return code
    }

    func look(_ code: String) -> Entry {
        entries.withLock { entries in
            guard let entry = entries[code] else { return .unknown }
            return entry.used ? .used(entry.user) : .unused(entry.user)
        }
    }

    /// The code's entry before this use; `consume` marks it used.
    func redeem(_ code: String, consume: Bool) -> Entry {
        entries.withLock { entries in
            guard let entry = entries[code] else { return .unknown }
            if consume { entries[code]?.used = true }
            return entry.used ? .used(entry.user) : .unused(entry.user)
        }
    }
}

/// What the test provider gets wrong, one flaw at a time; `none` is a provider that conforms.
enum ProviderFlaw: String, Decodable, Sendable {
    case none
    /// Names a new subject at every registration.
    case randomSubject
    /// Keeps the pending nonce in the server half instead of the session.
    case keepsPendingInMemory
    /// Refuses an unknown code with a `GenericError`.
    case genericRefusal
    /// The client half replaces the server half's refusal with an error of its own.
    case clientWrapsRefusal
    /// The client half ignores the server half's refusal and returns.
    case clientSwallowsRefusal
    /// The client half sends an empty code when the app cancels.
    case ignoresCancel
    /// Checks the nonce only when the confirmation carries one it can read.
    case optionalNonceCheck
    /// Never compares the confirmation's nonce with the session's.
    case ignoresNonce
    /// Never marks a code used.
    case reusableCodes
    /// Answers a replay naming the code itself, not the grant its first use reported.
    case replayNamesCode
}

/// The test provider's messages: the code, then (with `twoStep`) the nonce that confirms it.
/// Nonce to code, in one server half's memory.
private final class PendingCodes: Sendable {
    let codes = Mutex<[String: String]>([:])
}

private struct Message: Codable {
    var code: String?
    var nonce: String?
}

private struct Pending: Codable {
    var code: String?
    var nonce: String?
}

/// The host's one code book: the provider's configuration does not name it.
private enum CodeBookKey: PluginServiceKey {
    typealias Value = CodeBook
    static let name = "code book"
}

/// A small identity provider made to be broken: the app types a code the server half checks in a
/// ``CodeBook``; with `twoStep` the server half answers with a nonce the client half sends back.
private enum CodeProvider: IdentityProviderPlugin {
    struct Configuration: Decodable, Sendable {
        var twoStep = false
        var flaw = ProviderFlaw.none
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Keys.self)
            twoStep = try container.decode(Bool.self, forKey: .twoStep, default: false)
            flaw = try container.decode(ProviderFlaw.self, forKey: .flaw, default: .none)
        }
        private enum Keys: String, CodingKey { case twoStep, flaw }
    }
    static let typeIdentifier: PluginTypeIdentifier = "test.codes"
    static let summary = "single-use codes, flawed on request"

    static func makeIdentityProvider(configuration: Configuration, context: PluginContext) -> any IdentityProvider {
        Client(descriptor: context.descriptor, twoStep: configuration.twoStep, flaw: configuration.flaw)
    }

    static func makeHost(configuration: Configuration, context: PluginContext) throws -> any IdentityProviderHost {
        let book = try context.services.require(CodeBookKey.self)
        return Host(
            descriptor: context.descriptor,
            twoStep: configuration.twoStep,
            flaw: configuration.flaw,
            book: book
        )
    }

    struct Client: IdentityProvider {
        let descriptor: IdentityProviderDescriptor
        let twoStep: Bool
        let flaw: ProviderFlaw

        func register(_ context: RegistrationContext) async throws -> RegistrationResult {
            let code = try await ask(twoStep ? .initialize : .finish, context) ?? ""
            let reply = try await send(Message(code: code), context)
            guard twoStep else { return try finished(reply) }
            guard case .challenge(let nonce) = reply else { throw GenericError(.requestInvalid) }
            _ = try await ask(.finish, context)
            return try finished(try await send(Message(nonce: String(decoding: nonce, as: UTF8.self)), context))
        }

        private func ask(
            _ step: CustomRegistrationChallenge.Step,
            _ context: RegistrationContext
        ) async throws -> String? {
            let challenge = CustomRegistrationChallenge(identityProvider: descriptor, step: step)
            switch await context.responder.customRegistration(challenge) {
            case .data(let data): return data
            case .cancel where flaw == .ignoresCancel: return nil
            case .cancel: throw GenericError(.actionCancelled)
            }
        }

        private func send(_ message: Message, _ context: RegistrationContext) async throws -> ServerReply {
            let data = try JSONEncoder().encode(message)
            switch flaw {
            case .clientWrapsRefusal:
                do {
                    return try await context.server.send(data)
                } catch {
                    throw GenericError(.requestInvalid, message: "The registration failed.")
                }
            case .clientSwallowsRefusal:
                return (try? await context.server.send(data)) ?? .completed(nil, info: nil)
            default:
                return try await context.server.send(data)
            }
        }

        private func finished(_ reply: ServerReply) throws -> RegistrationResult {
            guard case .completed(_, let info) = reply else { throw GenericError(.requestInvalid) }
            return RegistrationResult(info: info)
        }
    }

    struct Host: IdentityProviderHost {
        let descriptor: IdentityProviderDescriptor
        let twoStep: Bool
        let flaw: ProviderFlaw
        let book: CodeBook
        /// Nonce to code: only the flawed host that keeps its pending registrations in memory.
        let pending = PendingCodes()

        func handle(_ request: RegistrationStepRequest) async throws -> RegistrationOutcome {
            let message = try? JSONDecoder().decode(Message.self, from: request.message)
            guard twoStep, let stored = request.session else {
                guard let code = message?.code else { throw GenericError(.requestInvalid, message: "Malformed.") }
                return try twoStep ? start(code) : redeem(code)
            }
            let session = try JSONDecoder().decode(Pending.self, from: stored)
            switch flaw {
            case .keepsPendingInMemory:
                guard let nonce = message?.nonce, let code = pending.codes.withLock({ $0.removeValue(forKey: nonce) })
                else {
                    return .failure(RegistrationError(.invalidState))
                }
                return try redeem(code)
            case .optionalNonceCheck:
                if let nonce = message?.nonce, nonce != session.nonce {
                    return .failure(RegistrationError(.invalidState))
                }
            case .ignoresNonce:
                guard message?.nonce != nil else { return .failure(RegistrationError(.invalidState)) }
            default:
                guard let nonce = message?.nonce, nonce == session.nonce else {
                    return .failure(RegistrationError(.invalidState))
                }
            }
            return try redeem(session.code ?? "")
        }

        private func start(_ code: String) throws -> RegistrationOutcome {
            guard case .unused = book.look(code) else { return try refuse() }
            let nonce = UUID().uuidString
            let session: Pending
            if flaw == .keepsPendingInMemory {
                pending.codes.withLock { $0[nonce] = code }
                session = Pending()
            } else {
                session = Pending(code: code, nonce: nonce)
            }
            return .challenge(payload: Data(nonce.utf8), session: try JSONEncoder().encode(session))
        }

        private func redeem(_ code: String) throws -> RegistrationOutcome {
            switch book.redeem(code, consume: flaw != .reusableCodes) {
            case .unknown:
                return try refuse()
            case .used(let user):
                let refusal = RegistrationError(.customRegistrationFailure, message: "The code was used before.")
                return .replayed(refusal, subject: user, grant: flaw == .replayNamesCode ? code : "grant:\(code)")
            case .unused(let user):
                let subject = flaw == .randomSubject ? UUID().uuidString : user
                return .registered(RegisteredIdentity(subject: subject, grant: "grant:\(code)"))
            }
        }

        private func refuse() throws -> RegistrationOutcome {
            guard flaw != .genericRefusal else { throw GenericError(.requestInvalid, message: "Unknown code.") }
            return .failure(RegistrationError(.customRegistrationFailure, message: "Unknown code."))
        }
    }
}

private func suite(twoStep: Bool, flaw: ProviderFlaw) -> IdentityProviderConformance {
    let book = CodeBook()
    return IdentityProviderConformance(
        CodeProvider.self,
        config: ["twoStep": .bool(twoStep), "flaw": .string(flaw.rawValue)],
        services: PluginServices().setting(CodeBookKey.self, to: book),
        register: .scripted {
            let code = book.issue(for: "ann")
            return twoStep
                ? [.customRegistration(.data(code)), .customRegistration(.data(nil))]
                : [
                    .customRegistration(.data(code))
                ]
        },
        refused: .scripted { [.customRegistration(.data("not a code"))] }
    )
}

/// The suite's checks, by name.
enum ConformanceCheckName {
    static let sameUser = "registers, and names the same user again whatever scopes the app asks for"
    static let anotherInstance = "each message may reach another instance of the server half"
    static let refusal = "a refused answer ends with the server half's RegistrationError, rethrown by the client half"
    static let cancel = "cancelling any challenge ends with actionCancelled; nobody is registered"
    static let malformed = "malformed messages, in place of any message, register nobody and revoke nothing"
    static let anotherRegistration = "a registration handed another registration's last message refuses it"
    static let replay = "replaying a registration's messages in a new registration registers nobody"
    static let revocation = "a replay it recognises revokes what the first use issued"
}

@Suite("Identity provider conformance suite")
struct IdentityProviderConformanceTests {
    @Test(
        "a provider without flaws passes; a check that cannot apply is skipped, not passed",
        arguments: [false, true]
    )
    func conforming(twoStep: Bool) async throws {
        let report = try await suite(twoStep: twoStep, flaw: .none).run()
        #expect(report.failed.isEmpty)
        #expect(report.passed.count == 7)
        // One message carries everything (nothing to tell registrations apart); with two, a
        // replay is refused at its first message, so none is ever recognised as one.
        let skipped = twoStep ? ConformanceCheckName.revocation : ConformanceCheckName.anotherRegistration
        #expect(report.skipped.map { String($0.prefix(skipped.count)) } == [skipped])
    }

    @Test(
        "each flawed provider fails exactly the check for its flaw",
        arguments: [
            (ProviderFlaw.randomSubject, true, ConformanceCheckName.sameUser),
            (.keepsPendingInMemory, true, ConformanceCheckName.anotherInstance),
            (.genericRefusal, false, ConformanceCheckName.refusal),
            (.clientWrapsRefusal, false, ConformanceCheckName.refusal),
            (.clientSwallowsRefusal, false, ConformanceCheckName.refusal),
            (.ignoresCancel, true, ConformanceCheckName.cancel),
            (.optionalNonceCheck, true, ConformanceCheckName.malformed),
            (.ignoresNonce, true, ConformanceCheckName.anotherRegistration),
            (.reusableCodes, false, ConformanceCheckName.replay),
            (.replayNamesCode, false, ConformanceCheckName.revocation),
        ]
    )
    func flawed(flaw: ProviderFlaw, twoStep: Bool, check: String) async throws {
        let failure = await #expect(throws: ConformanceFailure.self) {
            try await suite(twoStep: twoStep, flaw: flaw).run()
        }
        let failed = failure?.report.failed ?? []
        #expect(failed.map { $0.components(separatedBy: ": ").first ?? "" } == [check], "\(failed)")
    }

    @Test("a failure says what went wrong, in the app's terms")
    func messages() async throws {
        let cases: [(ProviderFlaw, String)] = [
            (
                .genericRefusal,
                "the server half refused with Generic requestInvalid (\"Unknown code.\"), not a RegistrationError"
            ),
            (.clientSwallowsRefusal, "the client half returned although the server half refused with Registration"),
            (.ignoresCancel, "cancelling challenge 1 of 1 ended with Registration customRegistrationFailure"),
        ]
        for (flaw, expected) in cases {
            let failure = await #expect(throws: ConformanceFailure.self) {
                try await suite(twoStep: false, flaw: flaw).run()
            }
            #expect(failure?.description.contains(expected) == true, "\(failure?.description ?? "")")
        }
    }
}
