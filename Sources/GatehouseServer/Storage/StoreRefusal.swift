import GatehouseKernel

/// Why the store refused a change or a lookup, in the store's terms: what the state forbids,
/// lacks or collides with. The store never speaks HTTP: how each is answered is the endpoints'
/// error mapping's business (`HTTP/StoreRefusal+HTTP.swift`).
///
/// A refusal that is a Gatehouse error and needs no more than that error's own status is thrown
/// as the error itself.
enum StoreRefusal: Error, Sendable {
    /// The state forbids it (a disenrolled device, a stateless user).
    case forbidden(any DomainError)
    /// What it names does not exist, or no longer.
    case notFound(any DomainError)
    /// It collides with what exists, or with what another request did meanwhile.
    case conflict(any DomainError)
    /// The DPoP proof does not fit the record: signed by another key, or used before.
    case proof(String)
    /// No installation is registered with the proof's key.
    case unknownInstallation(String)
    /// The user (profile) is gone: deregistered, expired, or never there.
    case userDeregistered
    /// The access token is unknown, revoked, expired or bound to another key.
    case accessToken(String)
    /// The grant (a refresh token, a registration) cannot be honoured.
    case grant(String)
    /// The registration's validity ended: the profile is gone, the user registers again.
    case registrationExpired
    /// A limit the instances share allows no more now; another request in `seconds`.
    case rateLimited(seconds: Int)
    /// The request names something the store cannot act on as asked.
    case request(String)
    /// The flow does not exist.
    case flowNotFound
    /// The flow expired; `registration`: it was a registration, whose expiry has a code of its own.
    case flowExpired(registration: Bool)
    /// Another request continued the flow first, or it expired meanwhile.
    case flowTaken
    /// Another registration of the same user on the same installation is under way or won.
    case registrationInProgress(String)
    /// The user has no device enrolled for mobile authentication (the portal's 1001).
    case noEnrolledDevice
    /// Try again in a moment: what was needed could not be had now.
    case busy(String)
    /// The stored state contradicts itself; nothing was changed.
    case inconsistent(String)
}
