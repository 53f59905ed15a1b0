import CustomAPIIdentityProvider
import Foundation

/// The demo's custom registration API, served in-process as `one-time-code`: the first step
/// takes the user's e-mail address and "sends" a six-digit code (the code comes back in the
/// reply's data, standing in for the e-mail); the second step checks the code. A wrong code may
/// be tried again (status 4001).
struct OneTimeCodeRegistrationAPI: CustomRegistrationAPI {
    struct State: Codable {
        var user: String
        var code: String
    }

    func initialize(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        guard let user = request.data?.trimmingCharacters(in: .whitespaces), user.contains("@"), user.count <= 254
        else {
            return CustomRegistrationReply(status: 5001, data: "Give an e-mail address to register.")
        }
        let code = String(format: "%06d", Int.random(in: 0..<1_000_000))
        let state = String(decoding: try JSONEncoder().encode(State(user: user, code: code)), as: UTF8.self)
        return CustomRegistrationReply(status: 2000, data: "Code sent to \(user): \(code)", state: state)
    }

    func complete(_ request: CustomRegistrationRequest) async throws -> CustomRegistrationReply {
        guard let text = request.state, let state = try? JSONDecoder().decode(State.self, from: Data(text.utf8)) else {
            return CustomRegistrationReply(status: 5002, data: "Start the registration again.")
        }
        guard request.data == state.code else {
            return CustomRegistrationReply(status: 4001, data: "That code is not right.")
        }
        return CustomRegistrationReply(status: 2000, data: "Welcome, \(state.user).", userID: state.user)
    }
}
