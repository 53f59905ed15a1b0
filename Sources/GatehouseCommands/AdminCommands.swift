import ArgumentParser
import Foundation
import GatehouseClient
import GatehouseProtocol
import GatehouseServer
import GatehouseServerCommand

/// `gatehouse admin …`: a helpdesk's view of a running server through its admin API
/// (`/v1/admin/…`), as an admin client of the manifest's `server.admin.clients`.
struct AdminCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Find users, read their devices and audit trail, revoke sessions and deregister, over the admin API.",
        discussion: """
            Every command signs in as an admin client of the server's manifest (server.admin.clients): \
            --client-id names it, and its secret comes from a file only you can read (--client-secret-file) \
            or from $GATEHOUSE_ADMIN_SECRET, never from the command line. Reading needs the scope \
            admin:read, changing admin:write. Every change is written to the audit trail with the actor \
            admin_client:<id>.
            """,
        subcommands: [
            Users.self, User.self, RevokeSessions.self, RemoveAuthenticator.self, Disenrol.self, Deregister.self,
            ClearLockout.self, Audit.self,
        ]
    )

    struct Users: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Find users: by the beginning of their subject, a subject, a profile or an installation."
        )

        @OptionGroup var admin: AdminOptions

        @Option(help: "The beginning of the subject, any case (what a user tells the helpdesk: ann@).")
        var subjectPrefix: String?

        @Option(help: "The subject, exactly.")
        var subject: String?

        @Option(help: "The identity provider's id (with --subject, say).")
        var identityProvider: String?

        @Option(help: "A profile's id: the user it belongs to.")
        var profile: String?

        @Option(help: "An installation's id: the users registered on it.")
        var installation: String?

        @Option(help: "Users at most (1–200).")
        var limit: Int = 50

        @Flag(help: "Print the admin API's JSON answer.")
        var json = false

        func validate() throws {
            guard [subjectPrefix, subject, identityProvider, profile, installation].contains(where: { $0 != nil })
            else {
                throw ValidationError(
                    "Name whom to find: --subject-prefix, --subject, --identity-provider, --profile or --installation."
                )
            }
            guard (1...200).contains(limit) else { throw ValidationError("--limit must be from 1 to 200.") }
        }

        func run() async throws {
            try await admin.running { api in
                let response = try await api.get(
                    Endpoint.adminUsers,
                    [
                        ("subject_prefix", subjectPrefix), ("subject", subject),
                        ("identity_provider", identityProvider), ("profile_id", profile),
                        ("installation_id", installation), ("limit", String(limit)),
                    ]
                )
                if json { return AdminOutput.raw(response.body) }
                let users = try AdminAPI.decode(UserList.self, response).users
                guard !users.isEmpty else { return CommandSupport.output("No user found.") }
                AdminOutput.table(
                    ["SUBJECT", "IDENTITY PROVIDER", "PROFILES", "LAST USED"],
                    users.map {
                        [$0.subject, $0.identityProvider, String($0.profiles), AdminOutput.time($0.lastUsedAt)]
                    }
                )
            }
        }

        private struct UserList: Decodable { var users: [UserSummary] }
    }

    struct User: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Show one user: their profiles (devices), authenticators, sessions, push enrolment and pending requests."
        )

        @OptionGroup var admin: AdminOptions

        @Option(help: "The user's identity provider (its id in the manifest).")
        var identityProvider: String

        @Option(help: "The user's subject at it (e.g. the e-mail address).")
        var subject: String

        @Flag(help: "Print the admin API's JSON answer.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                let response = try await api.get(
                    Endpoint.adminUser,
                    [("identity_provider", identityProvider), ("subject", subject)]
                )
                if json { return AdminOutput.raw(response.body) }
                AdminOutput.describe(try AdminAPI.decode(UserDetail.self, response))
            }
        }
    }

    struct RevokeSessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke every session of a profile: the app must log in again with its PIN."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: "The profile's id (`gatehouse admin user` shows it).")
        var profile: String

        @Flag(help: "Print the admin API's JSON answer.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                let response = try await api.send("POST", AdminAPI.profilePath(profile, "revoke-sessions"))
                if json { return AdminOutput.raw(response.body) }
                let revoked = try AdminAPI.decode(Revoked.self, response).revoked
                CommandSupport.output(
                    "Revoked \(revoked) active session\(revoked == 1 ? "" : "s") of profile \(profile)."
                )
            }
        }

        private struct Revoked: Decodable { var revoked: Int }
    }

    struct RemoveAuthenticator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove one authenticator (a biometric, say) of a profile; the PIN cannot be removed."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: "The profile's id.")
        var profile: String

        @Argument(help: "The authenticator's id in the manifest (e.g. face).")
        var authenticator: String

        @Flag(help: "Print a JSON object instead of a sentence.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                _ = try await api.send("DELETE", AdminAPI.profilePath(profile, "authenticators", authenticator))
                AdminOutput.done(
                    json: json,
                    ["profile_id": profile, "authenticator": authenticator, "result": "removed"],
                    "Removed the authenticator \(authenticator) of profile \(profile)."
                )
            }
        }
    }

    struct Disenrol: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disenrol a profile's device from mobile authentication: no more pushes reach it."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: "The profile's id.")
        var profile: String

        @Flag(help: "Print a JSON object instead of a sentence.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                _ = try await api.send("DELETE", AdminAPI.profilePath(profile, "push-enrolment"))
                AdminOutput.done(
                    json: json,
                    ["profile_id": profile, "result": "disenrolled"],
                    "Disenrolled the device of profile \(profile) from mobile authentication."
                )
            }
        }
    }

    struct Deregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deregister a profile: it, its authenticators and sessions go (a lost or stolen device)."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: "The profile's id.")
        var profile: String

        @Flag(help: "Print a JSON object instead of a sentence.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                _ = try await api.send("DELETE", AdminAPI.profilePath(profile))
                AdminOutput.done(
                    json: json,
                    ["profile_id": profile, "result": "deregistered"],
                    "Deregistered profile \(profile); the app learns it on its next request."
                )
            }
        }
    }

    struct ClearLockout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set a profile's count of failed attempts back to zero (where the manifest allows it)."
        )

        @OptionGroup var admin: AdminOptions

        @Argument(help: "The profile's id.")
        var profile: String

        @Flag(help: "Print a JSON object instead of a sentence.")
        var json = false

        func run() async throws {
            try await admin.running { api in
                _ = try await api.send("POST", AdminAPI.profilePath(profile, "clear-lockout"))
                AdminOutput.done(
                    json: json,
                    ["profile_id": profile, "result": "cleared"],
                    "Cleared the failed attempts of profile \(profile)."
                )
            }
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read the audit trail (newest first), or export it as JSON lines.",
            subcommands: [List.self, Export.self],
            defaultSubcommand: List.self
        )

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A page of the audit trail, newest first; --before continues with older events."
            )

            @OptionGroup var admin: AdminOptions
            @OptionGroup var filters: AuditFilters

            @Option(help: "Events at most (1–1000).")
            var limit: Int = 50

            @Option(help: "Events older than this one (the number the previous page ends with).")
            var before: Int64?

            @Flag(help: "Print the admin API's JSON answer.")
            var json = false

            func validate() throws {
                guard (1...1000).contains(limit) else { throw ValidationError("--limit must be from 1 to 1000.") }
                if let before, before < 1 { throw ValidationError("--before must be a positive event number.") }
            }

            func run() async throws {
                try await admin.running { api in
                    let response = try await api.get(
                        Endpoint.adminAudit,
                        try filters.query() + [("limit", String(limit)), ("before", before.map(String.init))]
                    )
                    if json { return AdminOutput.raw(response.body) }
                    let page = try AdminAPI.decode(AuditPage.self, response)
                    guard !page.events.isEmpty else { return CommandSupport.output("No event found.") }
                    for record in page.events { CommandSupport.output(AdminOutput.line(record)) }
                    if let next = page.nextCursor {
                        Terminal.say("Older events: add --before \(next).")
                    }
                }
            }
        }

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Write the events the filters select as JSON lines, oldest first, to standard output.",
                discussion: """
                    One JSON object a line (application/x-ndjson), every page of the trail until the \
                    newest event: gatehouse admin audit export --since 2026-01-01 > events.jsonl. \
                    How many were written is said on standard error.
                    """
            )

            @OptionGroup var admin: AdminOptions
            @OptionGroup var filters: AuditFilters

            @Option(help: "Start after this event (the `seq` of the last line of an earlier export).")
            var after: Int64?

            func validate() throws {
                if let after, after < 0 { throw ValidationError("--after must be an event number, 0 or more.") }
            }

            /// Events a request asks for; the export follows the last one's `seq` until a page is short.
            static let pageSize = 10_000

            func run() async throws {
                try await admin.running { api in
                    let query = try filters.query()
                    var cursor = after ?? 0
                    var written = 0
                    while true {
                        let response = try await api.get(
                            Endpoint.adminAuditExport,
                            query + [("after", String(cursor)), ("limit", String(Self.pageSize))]
                        )
                        let lines = response.body.split(separator: UInt8(ascii: "\n"))
                        for line in lines { FileHandle.standardOutput.write(Data(line) + Data("\n".utf8)) }
                        written += lines.count
                        guard lines.count >= Self.pageSize, let last = lines.last else { break }
                        guard let seq = (try? AdminAPI.decoder.decode(Sequenced.self, from: Data(last)))?.seq,
                            seq > cursor
                        else {
                            throw AdminAPIFailure(
                                "The export's last line has no event number to continue after.",
                                status: ExitStatus.software
                            )
                        }
                        cursor = seq
                    }
                    Terminal.say("Exported \(written) event\(written == 1 ? "" : "s").")
                }
            }

            private struct Sequenced: Decodable { var seq: Int64 }
        }
    }
}

/// The filters of `admin audit` and `admin audit export`.
struct AuditFilters: ParsableArguments {
    @Option(help: "The user's subject (e.g. the e-mail address).")
    var user: String?

    @Option(help: "The user's identity provider.")
    var identityProvider: String?

    @Option(help: "The profile the events are about.")
    var profile: String?

    @Option(help: "The event: registration, login, login_failure, lockout, admin_revoke_sessions, …")
    var event: String?

    @Option(help: "Who acted: user, server, admin_client:<id>, operator:<subject>.")
    var actor: String?

    @Option(
        help:
            "From this time on: RFC 3339 (2026-11-25T12:00:00Z), a day (2026-11-25, UTC) or a time ago (30m, 24h, 7d)."
    )
    var since: String?

    @Option(help: "Before this time, written as --since.")
    var until: String?

    /// The query parameters of the filters given.
    func query(now: Date = Date()) throws -> [(String, String?)] {
        [
            ("subject", user), ("identity_provider", identityProvider), ("profile_id", profile), ("event", event),
            ("actor", actor), ("since", try since.map { try Self.time($0, "--since", now: now) }),
            ("until", try until.map { try Self.time($0, "--until", now: now) }),
        ]
    }

    /// `text` as RFC 3339: a time as such, a day at midnight UTC, or `30m`, `24h`, `7d` before `now`.
    static func time(_ text: String, _ option: String, now: Date) throws -> String {
        let units: [Character: Double] = ["m": 60, "h": 3600, "d": 86_400]
        if let unit = text.last.flatMap({ units[$0] }), let count = Int(text.dropLast()), (0...36_500).contains(count) {
            return now.addingTimeInterval(-Double(count) * unit).formatted(.iso8601)
        }
        if text.utf8.count == 10, let day = try? Date(text + "T00:00:00Z", strategy: .iso8601) {
            return day.formatted(.iso8601)
        }
        if let date = try? Date(text, strategy: .iso8601) { return date.formatted(.iso8601) }
        throw ValidationError(
            "\(option) must be an RFC 3339 time (2026-11-25T12:00:00Z), a day (2026-11-25) or a time ago (30m, 24h, 7d), not \"\(text.prefix(64))\"."
        )
    }
}

/// Where the admin API is and who calls it: what every `admin` command takes.
struct AdminOptions: ParsableArguments {
    @Option(
        name: .customLong("server"),
        help: "The token server's URL (default: $GATEHOUSE_SERVER, else http://127.0.0.1:8080)."
    )
    var serverOption: String?

    /// `--server`, else `GATEHOUSE_SERVER`, as the device and portal commands take it.
    var server: String { EnvironmentSettings().resolve(serverOption, "server") ?? "http://127.0.0.1:8080" }

    @Option(help: "The admin client's id (server.admin.clients; default: $GATEHOUSE_ADMIN_CLIENT_ID).")
    var clientID: String?

    @Option(
        help: ArgumentHelp(
            "A file holding the admin client's secret, readable by you only (default: $GATEHOUSE_ADMIN_SECRET).",
            valueName: "file"
        )
    )
    var clientSecretFile: String?

    /// The environment variable the secret may come from instead of a file.
    static let secretVariable = "GATEHOUSE_ADMIN_SECRET"

    /// Runs `work` with an admin API client: its refusals and failures print one line and end
    /// the command with their exit status.
    func running(_ work: (AdminAPI) async throws -> Void) async throws {
        try await CommandSupport.reportingFailures {
            do {
                let environment = ProcessInfo.processInfo.environment
                guard let id = clientID ?? environment["GATEHOUSE_ADMIN_CLIENT_ID"], !id.isEmpty else {
                    throw SettingError("Name the admin client with --client-id (or $GATEHOUSE_ADMIN_CLIENT_ID).")
                }
                try HTTPTransport.checkBaseURL(server)
                try Self.checkSecretStaysPrivate(server)
                let api = AdminAPI(transport: HTTPTransport(baseURL: server), clientID: id, secret: try secret())
                try await work(api)
            } catch let failure as AdminAPIFailure {
                FileHandle.standardError.write(Data("error: \(failure.description)\n".utf8))
                throw ExitCode(failure.status)
            }
        }
    }

    /// The admin secret goes out in every token request: over https, or plain http to this
    /// machine only (where nobody on the way can read it), as the console's public URL must be.
    static func checkSecretStaysPrivate(_ server: String) throws {
        guard let url = URL(string: server), url.scheme?.lowercased() == "http" else { return }
        let host = (url.host ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "[]")).lowercased()
        let loopback = host == "localhost" || host == "::1" || host.hasPrefix("127.")
        guard !loopback else { return }
        throw SettingError(
            "The server URL \(server) is plain http to another machine: the admin secret would cross the network "
                + "readable. Use https://, or http:// to 127.0.0.1 or localhost."
        )
    }

    /// The secret from `--client-secret-file`, else `GATEHOUSE_ADMIN_SECRET`. A file others may
    /// read is refused, as ssh refuses such a private key: the secret is as good as published.
    func secret() throws -> String {
        guard let path = clientSecretFile else {
            if let secret = ProcessInfo.processInfo.environment[Self.secretVariable], !secret.isEmpty {
                return secret
            }
            throw SettingError(
                "Give the admin client's secret in a file only you can read (--client-secret-file FILE) or in "
                    + "$\(Self.secretVariable); never on the command line."
            )
        }
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw SettingError("Cannot read the secret file \(path): it does not exist or is out of reach.")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw SettingError("The secret file \(path) is not a regular file.")
        }
        let permissions = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        guard permissions & 0o077 == 0 else {
            throw SettingError(
                "The secret file \(path) may be read by others (permissions \(String(permissions & 0o777, radix: 8))); "
                    + "make it yours alone with `chmod 600 \(path)`."
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingError("Cannot read the secret file \(path).")
        }
        // The line a text editor or `echo` ends the file with is not part of the secret.
        let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
        guard !secret.isEmpty else { throw SettingError("The secret file \(path) is empty.") }
        return secret
    }
}

/// A refusal or failure of the admin API: one line for the terminal, and the exit status
/// (README, "Exit statuses") the command ends with.
struct AdminAPIFailure: Error, CustomStringConvertible {
    var description: String
    var status: Int32

    init(_ description: String, status: Int32) {
        self.description = description
        self.status = status
    }

    /// What a refusal from the server means to the command: 400 `invalid_request` is the
    /// command line's mistake (64), 429 a wait (75), 503 an unavailable server (69), another 5xx
    /// a failure that should not happen (70), any other refusal a refusal (1).
    init(_ response: WireResponse, at path: String) {
        let body = try? WireCoding.decode(ErrorBody.self, from: response.body)
        // The server's sentence, never more than a line of it.
        let said = body.map { String($0.errorDescription.prefix(600)) } ?? "The server answered \(path) unexpectedly."
        let code = body.map { " \($0.error.prefix(64))" } ?? ""
        var description = "\(said) [HTTP \(response.status)\(code)]"
        if path == Endpoint.token, body?.error == "invalid_dpop_proof" {
            description += "; gatehouse admin sends Bearer tokens: use a client without requireDPoP"
        }
        switch (response.status, body?.error) {
        case (400, "invalid_request"): status = ExitStatus.usage
        case (429, _):
            status = ExitStatus.temporaryFailure
            if let wait = response.header("Retry-After") { description += "; try again in \(wait.prefix(8)) s" }
        case (503, _): status = ExitStatus.unavailable
        case (500..., _): status = ExitStatus.software
        default: status = ExitStatus.refused
        }
        self.description = description
    }
}

/// The admin API over HTTP: an access token from the token endpoint (`client_credentials` with
/// the admin client's HTTP Basic credentials), then the admin endpoints with it as a Bearer
/// token. A token that expires during a long export is replaced once.
actor AdminAPI {
    private let transport: HTTPTransport
    private let authorization: String
    private var token: String?

    init(transport: HTTPTransport, clientID: String, secret: String) {
        self.transport = transport
        // RFC 6749 §2.3.1: the id and the secret are form-encoded before they are joined.
        authorization =
            "Basic " + Data("\(Self.formEncoded(clientID)):\(Self.formEncoded(secret))".utf8).base64EncodedString()
    }

    /// `GET path?query`, the parameters without a value left out.
    func get(_ path: String, _ query: [(String, String?)]) async throws -> WireResponse {
        let pairs = query.compactMap { name, value in value.map { "\(name)=\(Self.formEncoded($0))" } }
        return try await send("GET", pairs.isEmpty ? path : path + "?" + pairs.joined(separator: "&"))
    }

    /// Sends an admin request; anything but 2xx is thrown as a refusal (`AdminAPIFailure`).
    func send(_ method: String, _ path: String) async throws -> WireResponse {
        let fresh = token == nil
        var response = try await request(method, path, token: try await accessToken())
        if response.status == 401, !fresh {
            // The token expired since it was issued: one new one, once.
            token = nil
            response = try await request(method, path, token: try await accessToken())
        }
        guard (200..<300).contains(response.status) else { throw AdminAPIFailure(response, at: path) }
        return response
    }

    private func request(_ method: String, _ path: String, token: String) async throws -> WireResponse {
        try await transport.send(
            WireRequest(
                method: method,
                path: path,
                headers: ["Authorization": "Bearer \(token)", "Accept": "application/json, application/x-ndjson"]
            )
        )
    }

    private func accessToken() async throws -> String {
        if let token { return token }
        let response = try await transport.send(
            WireRequest(
                method: "POST",
                path: Endpoint.token,
                headers: [
                    "Authorization": authorization, "Content-Type": "application/x-www-form-urlencoded",
                    "Accept": "application/json",
                ],
                body: Data("grant_type=client_credentials".utf8)
            )
        )
        guard response.status == 200 else { throw AdminAPIFailure(response, at: Endpoint.token) }
        guard let answer = try? WireCoding.decode(AccessTokenResponse.self, from: response.body),
            answer.tokenType.caseInsensitiveCompare("Bearer") == .orderedSame
        else {
            throw AdminAPIFailure(
                "The server's token endpoint did not answer with a Bearer access token.",
                status: ExitStatus.software
            )
        }
        token = answer.accessToken
        return answer.accessToken
    }

    /// `/v1/admin/profiles/{profile}/…`, each part escaped.
    static func profilePath(_ profile: String, _ rest: String...) -> String {
        Endpoint.adminProfilesPrefix + ([profile] + rest).map(pathEncoded).joined(separator: "/")
    }

    /// The admin API's dates are RFC 3339.
    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    /// The answer's JSON as `type`; an answer that is not is a failure of the server's.
    static func decode<T: Decodable>(_ type: T.Type, _ response: WireResponse) throws -> T {
        do {
            return try decoder.decode(type, from: response.body)
        } catch {
            throw AdminAPIFailure("The admin API's answer could not be read.", status: ExitStatus.software)
        }
    }

    /// A value for a form or a query: every byte but RFC 3986's unreserved ones as `%XX`.
    static func formEncoded(_ text: String) -> String { FormFields.percentEncoded(text) }

    /// One path segment, escaped the same way: a `/` in an id cannot name another endpoint.
    static func pathEncoded(_ text: String) -> String { FormFields.percentEncoded(text) }
}

/// How `admin` commands print for a person: tables, sentences and times in UTC.
enum AdminOutput {
    /// The server's answer as it came (`--json`).
    static func raw(_ body: Data) {
        var text = String(decoding: body, as: UTF8.self)
        if !text.hasSuffix("\n") { text += "\n" }
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// A change's outcome: a sentence, or with `--json` an object.
    static func done(json: Bool, _ object: [String: String], _ sentence: String) {
        guard json else { return CommandSupport.output(sentence) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        raw((try? encoder.encode(object)) ?? Data("{}".utf8))
    }

    /// `2026-11-25 12:00:00 UTC`, or `-` for none.
    static func time(_ date: Date?) -> String {
        guard let date else { return "-" }
        return date.formatted(.iso8601).replacingOccurrences(of: "T", with: " ").replacingOccurrences(
            of: "Z",
            with: " UTC"
        )
    }

    /// Columns padded to their widest cell.
    static func table(_ header: [String], _ rows: [[String]]) {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        for row in all {
            let cells = row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }
            CommandSupport.output(cells.joined(separator: "  "))
        }
    }

    /// One audit event on one line: when, its number, what, who, about whom, and the details.
    static func line(_ record: AuditRecord) -> String {
        var parts = [time(record.at), "#\(record.seq)", record.event, "by \(record.actor)"]
        if let subject = record.subject {
            parts.append("\(record.identityProvider.map { "\($0)/" } ?? "")\(subject)")
        }
        if let profile = record.profileID { parts.append("profile \(profile)") }
        parts += record.detail.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return parts.joined(separator: "  ")
    }

    /// What a helpdesk needs to know about a user, profile by profile.
    static func describe(_ user: UserDetail) {
        CommandSupport.output("User \(user.subject) (identity provider \(user.identityProvider))")
        for profile in user.profiles {
            CommandSupport.output("")
            CommandSupport.output("Profile \(profile.id): app \(profile.appID), installation \(profile.installationID)")
            let authenticators = profile.authenticators.map { "\($0.id) (since \(time($0.createdAt)))" }
            let fields: [(String, String)] = [
                ("Registered", time(profile.createdAt)),
                ("Last used", time(profile.lastUsedAt)),
                ("Expires", profile.expiresAt.map { time($0) } ?? "never"),
                ("Failed attempts", String(profile.failures)),
                ("Authenticators", authenticators.isEmpty ? "none" : authenticators.joined(separator: ", ")),
                ("Push", push(profile.pushEnrolment)),
                ("Sessions", "\(profile.sessions.filter(\.active).count) active of \(profile.sessions.count)"),
            ]
            let width = (fields.map(\.0.count).max() ?? 0) + 2
            for (name, value) in fields {
                CommandSupport.output("  " + (name + ":").padding(toLength: width, withPad: " ", startingAt: 0) + value)
            }
            for session in profile.sessions {
                CommandSupport.output(
                    "    \(session.id)  \(session.active ? "active" : "ended ")  issued \(time(session.issuedAt))  "
                        + "expires \(time(session.expiresAt))"
                )
            }
        }
        CommandSupport.output("")
        guard !user.pendingTransactions.isEmpty else { return CommandSupport.output("Pending transactions: none") }
        CommandSupport.output("Pending transactions:")
        for pending in user.pendingTransactions {
            CommandSupport.output(
                "  \(pending.id)  \(pending.type) from \(pending.apiClient), started \(time(pending.createdAt)), "
                    + "lapses \(time(pending.expiresAt))"
            )
        }
    }

    private static func push(_ enrolment: PushEnrolmentSummary?) -> String {
        guard let enrolment else { return "not enrolled" }
        if enrolment.disenrolled { return "disenrolled (enrolled \(time(enrolment.createdAt)))" }
        let platform = enrolment.platform.map { " (\($0))" } ?? ""
        let token = enrolment.hasPushToken ? "push token set" : "no push token"
        return "enrolled\(platform) since \(time(enrolment.createdAt)), \(token)"
    }
}
