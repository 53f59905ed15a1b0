import Foundation
import GatehouseProtocol

/// The one script of the login's pages, served from this site (`script-src 'self'`): the
/// waiting page asks how the phone's approval stands and moves on by itself; the sign-in and
/// passkeys pages run the WebAuthn ceremonies. Every page works as forms without it, but for
/// passkeys, which need the browser's API.
enum LoginScript {
    static let response = WireResponse(
        status: 200,
        headers: [
            "Content-Type": "text/javascript; charset=utf-8",
            "Cache-Control": "public, max-age=300",
            "X-Content-Type-Options": "nosniff",
        ],
        body: Data(source.utf8)
    )

    static let source = #"""
        "use strict";
        (() => {
          const toBytes = (text) => {
            const base64 = text.replace(/-/g, "+").replace(/_/g, "/");
            const padded = base64 + "=".repeat((4 - (base64.length % 4)) % 4);
            return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
          };
          const toText = (buffer) => {
            let binary = "";
            for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
            return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
          };
          const post = async (url, form) => {
            const response = await fetch(url, {
              method: "POST", credentials: "same-origin", cache: "no-store",
              headers: { "Content-Type": "application/x-www-form-urlencoded" },
              body: new URLSearchParams(new FormData(form)),
            });
            if (!response.ok) throw new Error("the server answered " + response.status);
            return (await response.json()).publicKey;
          };
          const credentialJSON = (credential) => {
            const response = credential.response;
            const json = {
              id: credential.id, rawId: toText(credential.rawId), type: credential.type,
              authenticatorAttachment: credential.authenticatorAttachment || undefined,
              clientExtensionResults: credential.getClientExtensionResults(), response: {
                clientDataJSON: toText(response.clientDataJSON),
              },
            };
            if (response.attestationObject) {
              json.response.attestationObject = toText(response.attestationObject);
              json.response.transports = response.getTransports ? response.getTransports() : [];
            } else {
              json.response.authenticatorData = toText(response.authenticatorData);
              json.response.signature = toText(response.signature);
              if (response.userHandle) json.response.userHandle = toText(response.userHandle);
            }
            return JSON.stringify(json);
          };
          const say = (text) => {
            let line = document.getElementById("script-error");
            if (!line) {
              line = document.createElement("p");
              line.id = "script-error"; line.className = "error"; line.setAttribute("role", "alert");
              document.querySelector("main h1").after(line);
            }
            line.textContent = text;
          };

          // The waiting page: ask every 1.5 s (at most 10 minutes); once the phone answered, go on.
          const waiting = document.getElementById("phone-complete");
          if (waiting) {
            const state = document.getElementById("phone-state");
            let asked = 0;
            const poll = async () => {
              if (++asked > 400) return;
              try {
                const response = await fetch(waiting.dataset.status, { credentials: "same-origin", cache: "no-store" });
                const answer = await response.json();
                if (answer.status === "approved") { state.textContent = "Approved. Signing you in…"; waiting.submit(); return; }
                if (answer.status === "denied" || answer.status === "expired") { waiting.submit(); return; }
              } catch (error) { /* the network may come back */ }
              setTimeout(poll, 1500);
            };
            setTimeout(poll, 1000);
          }

          // Sign in with a passkey: a discoverable credential, the user picks it.
          const signIn = document.getElementById("passkey-form");
          if (signIn) {
            document.getElementById("passkey").addEventListener("click", async () => {
              if (!window.PublicKeyCredential) { say("This browser has no passkeys."); return; }
              try {
                const options = await post(signIn.dataset.options, signIn);
                options.challenge = toBytes(options.challenge);
                options.allowCredentials = (options.allowCredentials || []).map((c) => ({ ...c, id: toBytes(c.id) }));
                const credential = await navigator.credentials.get({ publicKey: options });
                document.getElementById("passkey-credential").value = credentialJSON(credential);
                signIn.submit();
              } catch (error) { say("The passkey could not be used: " + error.message); }
            });
          }

          // Add a passkey.
          const register = document.getElementById("passkey-register");
          if (register) {
            document.getElementById("passkey-add").addEventListener("click", async () => {
              if (!window.PublicKeyCredential) { say("This browser has no passkeys."); return; }
              try {
                const options = await post(register.dataset.options, register);
                options.challenge = toBytes(options.challenge);
                options.user.id = toBytes(options.user.id);
                options.excludeCredentials = (options.excludeCredentials || []).map((c) => ({ ...c, id: toBytes(c.id) }));
                const credential = await navigator.credentials.create({ publicKey: options });
                document.getElementById("passkey-credential").value = credentialJSON(credential);
                register.submit();
              } catch (error) { say("The passkey was not added: " + error.message); }
            });
          }
        })();
        """#
}
