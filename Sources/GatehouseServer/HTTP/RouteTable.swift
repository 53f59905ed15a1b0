import GatehouseProtocol

/// Which handler answers a request: each served path with a handler per method, and path
/// prefixes whose handler reads the rest of the path (a flow's or a transaction's id). Built once
/// at start-up; finding a route is one dictionary lookup, or a walk of the few prefixes.
struct RouteTable<Server: Sendable>: Sendable {
    typealias Handler = @Sendable (Server, WireRequest) async throws -> WireResponse
    /// A prefix route's handler: also given the path after the prefix.
    typealias PrefixHandler = @Sendable (Server, WireRequest, _ rest: String) async throws -> WireResponse

    /// What a request found.
    enum Match {
        case handler(Handler)
        case prefix(PrefixHandler, rest: String)
        /// The path is served, but not for this method: answer 405 with these in `Allow`.
        case methodNotAllowed(allowed: String)
        case notFound
    }

    private var exact: [String: [String: Handler]] = [:]
    /// Longest first, so that a longer prefix wins over one it extends.
    private var prefixes: [(prefix: String, handler: PrefixHandler)] = []

    /// Serves `method` at `path`.
    mutating func add(_ method: String, _ path: String, _ handler: @escaping Handler) {
        exact[path, default: [:]][method] = handler
    }

    /// Serves every path that starts with `prefix` (and is not served exactly): the handler
    /// checks the method and the rest of the path itself.
    mutating func add(prefix: String, _ handler: @escaping PrefixHandler) {
        prefixes.append((prefix, handler))
        prefixes.sort { $0.prefix.count > $1.prefix.count }
    }

    func match(method: String, path: String) -> Match {
        if let methods = exact[path] {
            if let handler = methods[method] { return .handler(handler) }
            return .methodNotAllowed(allowed: methods.keys.sorted().joined(separator: ", "))
        }
        for route in prefixes where path.hasPrefix(route.prefix) {
            return .prefix(route.handler, rest: String(path.dropFirst(route.prefix.count)))
        }
        return .notFound
    }
}
