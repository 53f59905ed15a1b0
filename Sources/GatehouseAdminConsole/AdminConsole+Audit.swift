import Foundation
import GatehouseProtocol
import GatehouseServer

// The audit trail: filtered by event, user, operator and time (UTC), newest first, a page at a time with
// an "Older events" link carrying the cursor.

extension AdminConsole {
    func auditPage(_ request: WireRequest) async throws -> WireResponse {
        guard let signedIn = try await signedIn(request) else { return signInPage(for: request) }
        let query = FormFields(queryOf: request.path)
        func field(_ name: String, max: Int = 254) -> String? {
            guard let value = query?[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty,
                value.utf8.count <= max
            else { return nil }
            return value
        }
        let event = field("event").flatMap { AuditEvent(rawValue: $0) }
        let subject = field("subject", max: 1024)
        let operatorSubject = field("operator")
        let identityProvider = field("identity_provider", max: 128)
        let profile = field("profile", max: 128)
        let sinceText = field("since", max: 32)
        let untilText = field("until", max: 32)
        let since = sinceText.flatMap(ConsoleText.parseUTC)
        let until = untilText.flatMap(ConsoleText.parseUTC)
        var problems: [String] = []
        if sinceText != nil, since == nil { problems.append("“From” is not a date and time.") }
        if untilText != nil, until == nil { problems.append("“Until” is not a date and time.") }
        let before = field("before", max: 20).flatMap { Int64($0) }
        let page = try await admin().auditEvents(
            AuditQuery(
                identityProvider: identityProvider,
                subject: subject,
                profileID: profile,
                event: event?.rawValue,
                actor: operatorSubject.map { AdminActor.consoleOperator($0).description },
                since: since,
                until: until,
                limit: configuration.auditPageSize,
                before: before
            )
        )
        // The filters as they were asked, for the form and the paging links.
        var filters: [(String, String)] = []
        if let event { filters.append(("event", event.rawValue)) }
        if let subject { filters.append(("subject", subject)) }
        if let operatorSubject { filters.append(("operator", operatorSubject)) }
        if let identityProvider { filters.append(("identity_provider", identityProvider)) }
        if let profile { filters.append(("profile", profile)) }
        if let since { filters.append(("since", ConsoleText.field(since))) }
        if let until { filters.append(("until", ConsoleText.field(until))) }
        var values: [String: Any] = [
            "subject": subject ?? "", "operator": operatorSubject ?? "",
            "since": since.map(ConsoleText.field) ?? sinceText ?? "",
            "until": until.map(ConsoleText.field) ?? untilText ?? "",
            "eventOptions": AuditEvent.allCases.map { option -> [String: Any] in
                ["value": option.rawValue, "label": ConsoleText.event(option.rawValue), "selected": option == event]
            },
        ]
        if let identityProvider { values["identityProvider"] = identityProvider }
        if let profile { values["profile"] = profile }
        if !problems.isEmpty { values["error"] = problems.joined(separator: " ") }
        values.merge(eventRows(page.events, linkUsers: true)) { $1 }
        if let cursor = page.nextCursor {
            values["older"] = Self.auditPath + "?" + FormFields.encode(filters + [("before", String(cursor))])
        }
        if before != nil {
            values["newest"] = Self.auditPath + (filters.isEmpty ? "" : "?" + FormFields.encode(filters))
        }
        return self.page(200, "Audit trail", template: "audit", values, chrome: chrome(signedIn, active: "audit"))
    }

    /// The events table's values: `hasEvents` and a row per event (`linkUsers`: the user cell
    /// links to their page).
    func eventRows(_ events: [AuditRecord], linkUsers: Bool) -> [String: Any] {
        [
            "hasEvents": !events.isEmpty,
            "events": events.map { record -> [String: Any] in
                var row: [String: Any] = [
                    "at": ConsoleText.time(record.at), "event": record.event, "label": ConsoleText.event(record.event),
                    "tone": ConsoleText.tone(record.event), "actor": ConsoleText.actor(record.actor),
                    "subject": record.subject ?? "", "profile": record.profileID ?? "",
                    "detail": ConsoleText.detail(record.detail),
                ]
                if linkUsers, let identityProvider = record.identityProvider, let subject = record.subject {
                    row["userLink"] = Self.userLink(identityProvider: identityProvider, subject: subject)
                }
                return row
            },
        ]
    }
}
