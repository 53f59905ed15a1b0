import GatehouseKernel

extension ServerError {
    /// How each of the store's refusals is answered.
    init(_ refusal: StoreRefusal) {
        switch refusal {
        case .forbidden(let error): self.init(error, status: 403)
        case .notFound(let error): self.init(error, status: 404)
        case .conflict(let error): self.init(error, status: 409)
        case .proof(let reason): self = .invalidProof(reason)
        case .unknownInstallation(let reason): self.init(401, "invalid_client", reason)
        case .userDeregistered: self = .userDeregistered
        case .accessToken(let reason): self = .invalidToken(reason)
        case .grant(let reason): self = .invalidGrant(reason)
        case .registrationExpired:
            self = .invalidGrant("The registration expired; register again.", code: GenericError.Code.userDeregistered)
        case .request(let reason): self = .invalidRequest(reason)
        case .flowNotFound: self.init(404, "not_found", "The flow does not exist; start again.")
        case .flowExpired(let registration):
            self.init(
                404,
                "not_found",
                "The flow expired; start again.",
                code: registration ? RegistrationError.Code.customRegistrationExpired : nil
            )
        case .flowTaken: self.init(409, "invalid_request", "The flow was continued by another request, or expired.")
        case .registrationInProgress(let reason): self.init(409, "registration_in_progress", reason)
        case .noEnrolledDevice:
            self.init(404, "not_found", "The user has no device enrolled for mobile authentication.", code: 1001)
        case .busy(let reason): self.init(503, "temporarily_unavailable", reason)
        case .rateLimited(let seconds):
            self = .tooManyRequests(retryAfter: seconds)
        case .inconsistent(let reason): self.init(500, "server_error", reason)
        }
    }
}

extension ServerError {
    /// 429 with `Retry-After`: the address has used up a limit for `seconds` more.
    static func tooManyRequests(retryAfter seconds: Int, _ what: String = "requests") -> ServerError {
        var error = ServerError(
            429,
            "too_many_requests",
            "Too many \(what) from this address; try again in \(seconds) s."
        )
        error.headers["Retry-After"] = String(seconds)
        return error
    }
}
