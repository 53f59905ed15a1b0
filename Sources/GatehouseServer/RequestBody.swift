import GatehouseKernel
public import GatehouseProtocol

/// Strict decoding of a JSON request body, shared by the token server and what is mounted on it:
/// size, media type, syntax (line and column), every field's type, and no unknown fields.
public enum RequestBody {
    /// Why a body was refused: the HTTP status and a sentence naming the problem.
    public struct Refusal: Error, Sendable, Equatable {
        public var status: Int
        public var description: String
    }

    public static func decode<T: Decodable>(
        _ type: T.Type,
        from request: WireRequest,
        maxBytes: Int
    ) throws(Refusal) -> T {
        guard request.body.count <= maxBytes else {
            throw Refusal(status: 413, description: "The request body is larger than \(maxBytes) bytes.")
        }
        guard let contentType = request.header("Content-Type")?.lowercased(), contentType.hasPrefix("application/json")
        else {
            throw Refusal(status: 415, description: "The request body must be JSON (Content-Type: application/json).")
        }
        let value: ConfigValue
        do {
            value = try JSONManifestFormat().parse(request.body)
        } catch {
            throw Refusal(status: 400, description: "The body is not valid JSON: \(error.problem).")
        }
        guard case .object = value else { throw Refusal(status: 400, description: "The body must be a JSON object.") }
        do {
            return try ConfigurationDecoder().decode(type, from: value)
        } catch {
            throw Refusal(status: 400, description: "Invalid field \(error.description).")
        }
    }
}
