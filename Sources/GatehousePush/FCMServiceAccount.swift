import Crypto
import Foundation
import _CryptoExtras

/// A Google service account's key file, the part FCM needs: who signs (`client_email`,
/// `private_key_id`), the RSA key, the token endpoint (`token_uri`) and the Firebase project
/// (`project_id`). The key is kept in memory only; no message shows it.
struct FCMServiceAccount: Sendable {
    var clientEmail: String
    var privateKeyID: String?
    var key: _RSA.Signing.PrivateKey
    var tokenURI: String
    var projectID: String

    private struct File: Decodable {
        var type: String?
        var client_email: String?
        var private_key_id: String?
        var private_key: String?
        var token_uri: String?
        var project_id: String?
    }

    /// Reads the JSON `data` of the file at `path`, the setting `key` names.
    init(json data: Data, path: String, key setting: String) throws(PushSetupError) {
        func refused(_ problem: String) -> PushSetupError {
            PushSetupError(
                key: setting,
                problem: "\(path) is not a service account key file: \(problem); download a key for the service "
                    + "account from the Firebase console (Project settings, Service accounts)"
            )
        }
        guard let file = try? JSONDecoder().decode(File.self, from: data) else { throw refused("not JSON") }
        guard file.type == nil || file.type == "service_account" else {
            throw refused("its type is not service_account")
        }
        guard let email = file.client_email, PushSenders.isPlainText(email) else { throw refused("no client_email") }
        guard let projectID = file.project_id, PushSenders.isPlainText(projectID), !projectID.contains("/") else {
            throw refused("no project_id")
        }
        guard let tokenURI = file.token_uri, PushSenders.isHTTPS(tokenURI) else {
            throw refused("no https token_uri")
        }
        guard let pem = file.private_key else { throw refused("no private_key") }
        guard let rsa = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else {
            throw refused("its private_key is not an RSA private key of 2048 bits or more in PEM")
        }
        clientEmail = email
        privateKeyID = file.private_key_id.flatMap { PushSenders.isPlainText($0) ? $0 : nil }
        self.key = rsa
        self.tokenURI = tokenURI
        self.projectID = projectID
    }

    /// The RS256 signature (RSASSA-PKCS1-v1_5 with SHA-256) over `input`.
    func sign(_ input: Data) throws -> Data {
        try key.signature(for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5).rawRepresentation
    }
}
