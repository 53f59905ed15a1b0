import Foundation
import GatehouseKernel
import GatehouseProtocol

extension PendingMobileAuthRequest {
    init(_ push: PushNotification, userInfo: [String: ConfigValue]) {
        self.init(
            transactionID: push.transactionID,
            profile: UserProfile(id: push.profileID),
            date: Date(timeIntervalSince1970: push.createdAt),
            timeToLive: push.timeToLive,
            message: push.message,
            userInfo: userInfo
        )
    }
}

extension ConfigValue {
    /// A push's `userInfo` as JSON values, key by key as received; a value JSON cannot hold (a
    /// date, raw data) is left out.
    static func pushPayload(_ userInfo: [String: Any]) -> [String: ConfigValue] {
        if JSONSerialization.isValidJSONObject(userInfo),
            let data = try? JSONSerialization.data(withJSONObject: userInfo),
            let values = try? JSONDecoder().decode([String: ConfigValue].self, from: data)
        {
            return values
        }
        var values: [String: ConfigValue] = [:]
        for (key, value) in userInfo {
            guard JSONSerialization.isValidJSONObject([value]),
                let data = try? JSONSerialization.data(withJSONObject: [value]),
                let decoded = try? JSONDecoder().decode([ConfigValue].self, from: data).first
            else { continue }
            values[key] = decoded
        }
        return values
    }
}

/// Reads server-sent events (the WHATWG format) from chunks that may split lines anywhere.
struct ServerSentEventParser {
    struct Event: Equatable {
        var id: String?
        var name: String
        var data: String
    }

    private var buffer = Data()
    private var id: String?
    private var name = "message"
    private var data: [String] = []

    mutating func feed(_ chunk: Data) -> [Event] {
        buffer.append(chunk)
        var events: [Event] = []
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            var line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex...newline)
            if line.hasSuffix("\r") { line.removeLast() }
            if line.isEmpty {
                if !data.isEmpty { events.append(Event(id: id, name: name, data: data.joined(separator: "\n"))) }
                (name, data) = ("message", [])
                continue
            }
            if line.hasPrefix(":") { continue }
            let field = line.prefix { $0 != ":" }
            var value = line.dropFirst(field.count).dropFirst()
            if value.hasPrefix(" ") { value = value.dropFirst() }
            switch field {
            case "id": id = String(value)
            case "event": name = String(value)
            case "data": data.append(String(value))
            default: break
            }
        }
        return events
    }
}
