import Crypto
import Foundation
import SwiftASN1
import X509

/// A certificate authority made for one test, and a server certificate it issued for 127.0.0.1:
/// the push senders trust the CA through their `caFile`, as an operator's proxy would be trusted,
/// with verification on.
struct TestCertificateAuthority {
    /// The CA's certificate, PEM: what `caFile` names.
    let caPEM: String
    /// The loopback server's certificate, PEM.
    let serverCertificatePEM: String
    /// The loopback server's private key, PEM.
    let serverKeyPEM: String

    init() throws {
        let now = Date()
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName("Gatehouse push test CA") }
        let ca = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(caKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86400),
            issuer: caName,
            subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey)
        )
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(serverKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86400),
            issuer: caName,
            subject: try DistinguishedName { CommonName("127.0.0.1") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])), .dnsName("localhost"),
                ])
            },
            issuerPrivateKey: .init(caKey)
        )
        caPEM = try ca.serializeAsPEM().pemString
        serverCertificatePEM = try server.serializeAsPEM().pemString
        serverKeyPEM = serverKey.pemRepresentation
    }

    /// Writes the CA's certificate to `directory`; returns the file's path.
    func writeCAFile(in directory: URL) throws -> String {
        let file = directory.appendingPathComponent("push-test-ca.pem")
        try Data(caPEM.utf8).write(to: file)
        return file.path
    }
}
