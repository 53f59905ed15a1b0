import Foundation
import GatehouseKernel
public import GatehouseProtocol

/// Strict decoding of a JSON request body, shared by the token server and what is mounted on it:
/// size, media type, syntax (line and column), every field's type, and no unknown fields.
public enum RequestBody {
    /// Why a body was refused: the HTTP status and a sentence naming the problem.
    public struct Refusal: Error, Sendable, Equatable {
        /// The HTTP status to answer: 413 for a body over the limit, 415 for a media type other than JSON (or a form
        /// where allowed), 400 for anything else.
        public var status: Int
        /// A sentence naming the problem, for `error_description`.
        public var description: String
    }

    /// Decodes the request's body as `type`, or refuses it with the status and sentence to answer.
    ///
    /// - Parameters:
    ///   - type: The message the endpoint expects.
    ///   - request: The request whose body is decoded; its `Content-Type` must name JSON (or a form).
    ///   - maxBytes: The largest body accepted, in bytes; a larger one is refused with 413.
    ///   - allowingForm: Whether the body is an OAuth request: a form
    ///     (`application/x-www-form-urlencoded`) is accepted as well as JSON, as the token,
    ///     revocation and introspection endpoints must (RFC 6749 §3.2, RFC 7009 §2.1, RFC 7662
    ///     §2.1), and parameters the endpoint does not know are ignored (RFC 6749 §3.1). A form's
    ///     fields are strings; a field given twice is refused.
    /// - Throws: ``Refusal`` for a body too large, of another media type, malformed, or not the message.
    public static func decode<T: Decodable>(
        _ type: T.Type,
        from request: WireRequest,
        maxBytes: Int,
        allowingForm: Bool = false
    ) throws(Refusal) -> T {
        guard request.body.count <= maxBytes else {
            throw Refusal(status: 413, description: "The request body is larger than \(maxBytes) bytes.")
        }
        // The media type exactly (parameters such as charset may follow), not a prefix of it.
        let mediaType = request.header("Content-Type")?.lowercased().split(separator: ";", maxSplits: 1).first
            .map { String($0.trimmingSpacesAndTabs) }
        if allowingForm, mediaType == "application/x-www-form-urlencoded" {
            guard let form = FormFields(body: request.body) else {
                throw Refusal(
                    status: 400,
                    description: "The form is malformed: a field is given twice, or holds bad UTF-8, % escapes or NUL."
                )
            }
            do {
                return try ConfigurationDecoder(ignoresUnknownKeys: true).decode(
                    type,
                    from: .object(form.values.mapValues { .string($0) })
                )
            } catch {
                throw Refusal(status: 400, description: "Invalid field \(error.description).")
            }
        }
        guard mediaType == "application/json" else {
            throw Refusal(
                status: 415,
                description: allowingForm
                    ? "The request body must be a form (application/x-www-form-urlencoded) or JSON (application/json)."
                    : "The request body must be JSON (Content-Type: application/json)."
            )
        }
        let value: ConfigValue
        do {
            value = try JSONManifestFormat().parse(request.body)
        } catch {
            throw Refusal(status: 400, description: "The body is not valid JSON: \(error.problem).")
        }
        guard case .object = value else { throw Refusal(status: 400, description: "The body must be a JSON object.") }
        // SQLite and C strings end at NUL, so a NUL would let what is stored or shown differ from
        // what was checked; no field has a use for one.
        if let path = nulPath(in: value) {
            throw Refusal(status: 400, description: "Invalid field \(path): contains a NUL character.")
        }
        do {
            return try ConfigurationDecoder(ignoresUnknownKeys: allowingForm).decode(type, from: value)
        } catch {
            throw Refusal(status: 400, description: "Invalid field \(error.description).")
        }
    }

    /// The key path of the first string (or key) holding U+0000, if any.
    private static func nulPath(in value: ConfigValue, at path: String = "") -> String? {
        switch value {
        case .string(let text): return text.utf8.contains(0) ? (path.isEmpty ? "body" : path) : nil
        case .list(let items):
            for (index, item) in items.enumerated() {
                if let found = nulPath(in: item, at: "\(path)[\(index)]") { return found }
            }
            return nil
        case .object(let fields):
            for (key, item) in fields {
                let child = path.isEmpty ? key : "\(path).\(key)"
                if key.utf8.contains(0) { return child }
                if let found = nulPath(in: item, at: child) { return found }
            }
            return nil
        case .null, .bool, .integer, .number: return nil
        }
    }
}

extension StringProtocol {
    /// Without the spaces and tabs around it (a header value's optional whitespace, RFC 9110
    /// §5.6.3), without Foundation's `trimmingCharacters`, which goes through NSString.
    var trimmingSpacesAndTabs: Substring {
        let text = Substring(self)
        let isSpace = { (character: Character) in character == " " || character == "\t" }
        let start = text.firstIndex { !isSpace($0) } ?? text.endIndex
        let end = text[start...].lastIndex { !isSpace($0) }.map { text.index(after: $0) } ?? start
        return text[start..<end]
    }
}
