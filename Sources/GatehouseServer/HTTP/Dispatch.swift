import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

// A request to its handler (a route or a mounted extension), and every failure to its response.

extension TokenServer {
    func answer(_ request: WireRequest) async -> WireResponse {
        do {
            do {
                return try await route(request)
            } catch let refusal as StoreRefusal {
                throw ServerError(refusal)
            }
        } catch var error as ServerError {
            // A request that presents an access token is a protected resource's (RFC 9449 §7.1).
            if request.header("Authorization")?.lowercased().hasPrefix("dpop ") == true { error = error.atResource() }
            logger.debug(
                "Refused",
                metadata: [
                    "endpoint": "\(endpointLabel(request.path))", "status": "\(error.status)",
                    "error": "\(error.body.error)",
                ]
            )
            return error.response
        } catch let error as any DomainError {
            return ServerError(error).response
        } catch {
            logger.error(
                "Request failed",
                metadata: ["endpoint": "\(endpointLabel(request.path))", "error": "\(String(reflecting: error))"]
            )
            return ServerError(500, "server_error", "The server could not complete the request.").response
        }
    }

    private func route(_ request: WireRequest) async throws -> WireResponse {
        let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
        if let mounted = extensions.first(where: { path.hasPrefix($0.pathPrefix) }) {
            return await mounted.handle(request)
        }
        switch Self.routes.match(method: request.method, path: path) {
        case .handler(let handler): return try await handler(self, request)
        case .prefix(let handler, let rest): return try await handler(self, request, rest)
        case .methodNotAllowed(let allowed): throw Self.methodNotAllowed(request, allowed: allowed)
        case .notFound: throw ServerError(404, "not_found", "There is no endpoint \(path).")
        }
    }
}
