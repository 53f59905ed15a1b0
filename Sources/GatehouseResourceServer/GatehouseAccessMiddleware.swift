import Foundation
public import GatehouseProtocol
import HTTPTypes
public import Hummingbird
import NIOCore

/// A request context that carries the access a ``GatehouseAccessMiddleware`` verified.
public protocol GatehouseRequestContext: RequestContext {
    /// Set by the middleware before the route runs.
    var access: VerifiedAccess? { get set }
}

/// A ready-made ``GatehouseRequestContext`` for applications with no context of their own.
public struct GatehouseAccessContext: GatehouseRequestContext {
    public var coreContext: CoreRequestContextStorage
    public var access: VerifiedAccess?

    public init(source: Source) {
        coreContext = .init(source: source)
        access = nil
    }
}

/// Protects the routes behind it: every request must carry a valid DPoP-bound Gatehouse token
/// that meets `requirement`; the route finds who it acts for in `context.access`. A refused
/// request never reaches the route and gets the challenge RFC 6750 and RFC 9449 describe.
///
/// ```swift
/// let validator = AccessValidator(
///     introspector: try HTTPIntrospection(tokenServer: url, resourceServerID: "gateway", secret: secret),
///     publicURL: "https://api.example.com"
/// )
/// router.group("account")
///     .add(middleware: GatehouseAccessMiddleware(validator, requirement: .init(scopes: ["read"])))
///     .get { _, context in "Hello, \(context.access?.subject ?? "")" }
/// ```
public struct GatehouseAccessMiddleware<Introspector: TokenIntrospecting, Context: GatehouseRequestContext>:
    RouterMiddleware
{
    public let validator: AccessValidator<Introspector>
    public let requirement: AccessValidator<Introspector>.Requirement

    public init(
        _ validator: AccessValidator<Introspector>,
        requirement: AccessValidator<Introspector>.Requirement = .init()
    ) {
        self.validator = validator
        self.requirement = requirement
    }

    public func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let access: VerifiedAccess
        do throws(AccessRefusal) {
            access = try await validator.validate(
                method: request.method.rawValue,
                path: request.uri.path,
                header: { name in HTTPField.Name(name).flatMap { request.headers[values: $0].last } },
                requirement: requirement
            )
        } catch {
            return Self.response(error)
        }
        var context = context
        context.access = access
        var response = try await next(request, context)
        if let nonce = validator.currentNonce(), let name = HTTPField.Name("DPoP-Nonce") {
            response.headers[name] = nonce
        }
        return response
    }

    static func response(_ refusal: AccessRefusal) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        headers[.wwwAuthenticate] = refusal.challenge
        if let nonce = refusal.nonce, let name = HTTPField.Name("DPoP-Nonce") { headers[name] = nonce }
        var body: [String: String] = ["error_description": refusal.message]
        if let error = refusal.error { body["error"] = error }
        let data = (try? WireCoding.encode(body)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: refusal.status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}
