import Foundation
import GatehouseKernel

/// The PIN length of each profile, kept by the app, as seed 004 recommends: the SDK never stores
/// the PIN, so it cannot say how long it is, and the server's policy may change at any time.
///
/// Written only when a registration or a PIN change succeeded (a PIN that was never set must not
/// change the pad), removed whenever the user is deregistered. Kept in a 0600 JSON file so it
/// survives the app being killed; the length of a PIN is not a secret worth sealing.
actor PinLengthStore {
    private let file: URL
    private var lengths: [String: Int]

    init(file: URL) throws {
        self.file = file
        if let data = try? Data(contentsOf: file) {
            lengths = try JSONDecoder().decode([String: Int].self, from: data)
        } else {
            lengths = [:]
        }
    }

    func length(for profile: UserProfile) -> Int? { lengths[profile.id] }

    func setLength(_ length: Int, for profile: UserProfile) throws {
        lengths[profile.id] = length
        try save()
    }

    func removeLength(for profile: UserProfile) throws {
        lengths[profile.id] = nil
        try save()
    }

    private func save() throws {
        try JSONEncoder().encode(lengths).write(to: file, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    }
}

/// The app's PIN pad: remembers the length a create-PIN challenge asked for until the flow
/// succeeds, and sizes the pad of an authentication from the store.
final class PinPad: RegistrationDelegate, ChangePinDelegate, Sendable {
    let store: PinLengthStore
    /// The PINs the "user" types, in order.
    private let typed: Typed
    /// The length the last create-PIN challenge asked for; stored only once the flow succeeded.
    let pendingLength = Pending()

    init(store: PinLengthStore, typing pins: [String]) {
        self.store = store
        self.typed = Typed(pins)
    }

    func customRegistration(_ challenge: CustomRegistrationChallenge) async -> CustomRegistrationResponse {
        .data(challenge.step == .initialize ? "jane@example.com" : "4821")
    }

    func createPin(_ challenge: CreatePinChallenge) async -> CreatePinResponse {
        await pendingLength.set(challenge.pinLength)
        print("   create-PIN pad with \(challenge.pinLength) digits")
        guard let pin = await typed.next() else { return .cancel }
        return .pin(PIN(pin))
    }

    func pin(_ challenge: PinChallenge) async -> PinResponse {
        let length = await store.length(for: challenge.profile)
        let left = challenge.remainingFailureCount.map { ", \($0) attempt\($0 == 1 ? "" : "s") left" } ?? ""
        print("   PIN pad with \(length.map(String.init) ?? "unknown") digits\(left)")
        guard let pin = await typed.next() else { return .cancel }
        return .pin(PIN(pin))
    }

    actor Typed {
        private var pins: [String]
        init(_ pins: [String]) { self.pins = pins }
        func next() -> String? { pins.isEmpty ? nil : pins.removeFirst() }
    }

    actor Pending {
        private(set) var length: Int?
        func set(_ length: Int) { self.length = length }
    }
}
