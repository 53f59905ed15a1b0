public import Foundation
public import GatehouseOutbound
import GatehouseProtocol

/// An activation message to send to a newly registered user.
public struct ActivationMail: Sendable, Equatable {
    /// The registrant's e-mail address; the account id when the registration gave no address.
    public var to: String
    /// The alias the registrant chose, repeated in the subject and the text.
    public var alias: String
    /// The one-time code the registrant enters with the activation PIN. It activates the account,
    /// so treat the message as a secret until it is used or expires (`activationCodeLifetime`).
    public var activationCode: String
    /// The manager's URL, for the registrant to see where they registered.
    public var managerURL: String

    /// A message for `to` with the code for the registration of `alias` at `managerURL`.
    public init(to: String, alias: String, activationCode: String, managerURL: String) {
        self.to = to
        self.alias = alias
        self.activationCode = activationCode
        self.managerURL = managerURL
    }
}

/// Sends activation codes. The default writes each message to an outbox directory.
public protocol ActivationMailSender: Sendable {
    /// Sends `mail`, or throws when it could not be handed on. The client is then answered 500
    /// `server_error`, though the registration is already stored.
    func send(_ mail: ActivationMail) async throws
}

/// Writes each activation message as an RFC 5322 `.eml` file into a directory, for a mail
/// transfer agent (or a person testing) to pick up.
public struct OutboxMailSender: ActivationMailSender {
    /// The outbox: created (private to the server's user) at the first message if missing.
    public let directory: URL
    /// The `From:` address of every message.
    public let from: String

    /// An outbox in `directory`, its messages from `from` (default `no-reply@gatehouse.invalid`,
    /// which no one can answer: set a real address for mail that leaves the host).
    public init(directory: URL, from: String = "no-reply@gatehouse.invalid") {
        self.directory = directory
        self.from = from
    }

    /// Writes `mail` as a new `<unix time>-<uuid>.eml` file, readable by the server's user only.
    /// Throws when the folder or the file cannot be written, or when `from`, the address or the
    /// alias holds a control character or line break (which would add headers to the message).
    public func send(_ mail: ActivationMail) async throws {
        try PrivateFiles.createFolder(directory)
        let id = UUID().uuidString.lowercased()
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        // The alias and the address come from the person registering: a line break in either
        // would add headers of their choosing (validators refuse them; this is the last guard).
        for value in [from, mail.to, mail.alias] where value.unicodeScalars.contains(where: MailHeader.isControl) {
            throw MailHeader.Refusal(value: String(value.prefix(64)))
        }
        let text = [
            "From: \(from)",
            "To: \(mail.to)",
            "Subject: \(MailHeader.encodedText("Activate \(mail.alias)"))",
            "Date: \(formatter.string(from: Date()))",
            "Message-ID: <\(id)@gatehouse.invalid>",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "",
            "Your registration at \(mail.managerURL) is ready.",
            "",
            "Activation code: \(mail.activationCode)",
            "Alias: \(mail.alias)",
            "",
            "Enter the code with the activation PIN you chose.",
            "",
        ].joined(separator: "\r\n")
        // The mail holds an activation code: private to the server's user, like its database.
        try PrivateFiles.writeNew(
            Data(text.utf8),
            to: directory.appendingPathComponent("\(Int(Date().timeIntervalSince1970))-\(id).eml").path
        )
    }
}

/// Header values for mail (RFC 5322, RFC 2047).
enum MailHeader {
    /// A header value that cannot be written safely.
    struct Refusal: Error, CustomStringConvertible {
        var value: String
        var description: String {
            "a mail header value holds a control character or line break: \(value.debugDescription)"
        }
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// An unstructured value (a Subject) as printable ASCII: unchanged when it already is, else
    /// RFC 2047 encoded-words (UTF-8, base64) of at most 75 characters, folded onto continuation
    /// lines, each word whole characters so no reader sees half a letter.
    static func encodedText(_ text: String) -> String {
        if text.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) { return text }
        // "=?UTF-8?B?" and "?=" leave 63 base64 characters: 45 bytes of UTF-8 per word.
        let bytesPerWord = 45
        var words: [String] = []
        var chunk = Data()
        for character in text {
            let bytes = Data(String(character).utf8)
            if chunk.count + bytes.count > bytesPerWord, !chunk.isEmpty {
                words.append("=?UTF-8?B?\(chunk.base64EncodedString())?=")
                chunk = Data()
            }
            chunk.append(bytes)
        }
        if !chunk.isEmpty { words.append("=?UTF-8?B?\(chunk.base64EncodedString())?=") }
        return words.joined(separator: "\r\n ")
    }
}

/// What a linked service receives after an account's first activation.
///
/// On the wire it is a JSON object with the keys `service_mapping_id`, `account_id`, `email` and
/// `attributes`.
public struct LinkedServiceDelivery: Codable, Sendable, Equatable {
    /// The `id` of the service mapping in the manifest (`service_mapping_id`): which service this
    /// delivery is for.
    public var serviceMappingID: String
    /// The manager's id of the activated account (`account_id`): the key the service keeps to
    /// match later sign-ins to its account.
    public var accountID: String
    /// The account's e-mail address, when the registration gave one.
    public var email: String?
    /// The personal attributes the registrant gave, by attribute name; empty when none were
    /// collected.
    public var attributes: [String: String]

    enum CodingKeys: String, CodingKey {
        case serviceMappingID = "service_mapping_id"
        case accountID = "account_id"
        case email, attributes
    }
}

/// Creates the account at a linked service after the first activation.
public protocol LinkedServiceProvisioner: Sendable {
    /// Delivers `delivery` to the service at `url`; throws when it did not accept it.
    func provision(_ delivery: LinkedServiceDelivery, at url: OutboundURL) async throws
}

/// Posts the delivery as JSON to the service mapping's webhook URL.
public struct WebhookProvisioner: LinkedServiceProvisioner {
    /// Seconds one delivery may take, connection to answer (0.1–600, default 10).
    public let timeout: TimeInterval

    /// - Parameter timeout: Seconds for the whole call, 0.1–600 (anything else is taken to the nearer end).
    public init(timeout: TimeInterval = 10) {
        // Kept finite and small: the conversion to a Duration traps on NaN, infinity or overflow.
        self.timeout = timeout.isNaN ? 10 : min(max(timeout, 0.1), 600)
    }

    /// Posts `delivery` to `url` as `application/json` and reads at most 4096 bytes of the answer.
    /// Throws when the call fails or times out, and when the service answers with a status
    /// outside 200–299.
    public func provision(_ delivery: LinkedServiceDelivery, at url: OutboundURL) async throws {
        let answer = try await OutboundHTTP.post(
            url,
            headers: [("Content-Type", "application/json")],
            body: try JSONEncoder().encode(delivery),
            timeout: .milliseconds(Int64(timeout * 1000)),
            maxResponseBytes: 4096
        )
        guard (200..<300).contains(answer.status) else {
            throw OutboundHTTP.Failure(url: url.text, reason: "the service answered HTTP \(answer.status)")
        }
    }
}
