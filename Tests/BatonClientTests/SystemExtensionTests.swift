// SPDX-License-Identifier: GPL-2.0-or-later
import BatonTestBus
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 26: the extension runs in Debian's Chromium and Firefox ESR from the system locations
/// scripts/install links (install-test checks that it places those links, reaching the installed
/// copy), with no step in the browser. Run as root inside a private mount namespace (`unshare -m`):
/// empty tmpfs over /usr/share/chromium and /usr/share/mozilla, holding only a link to the tree's
/// browser/extension under the name scripts/install gives it, so the host's directories stay
/// untouched and other tests' browsers never see it. Each browser runs first without the link
/// (the control: nothing loads then, so the check can fail), then with it. The browsers are ended
/// with SIGKILL: a process started by Foundation's Process inherits a mask with SIGTERM blocked.
extension RealBrowserTests {
    @Suite("The extension from the system install, in headless Chromium and Firefox ESR", .serialized,
           .enabled(if: getuid() == 0, "needs root for a private mount namespace over /usr/share (scripts/test runs as root)"),
           .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), "needs unshare (util-linux)"))
    struct SystemExtensionTests {
        static let extensionTree = Built.packageRoot.appendingPathComponent("browser/extension").path
        /// The extension's id, fixed by the manifest's public key (the Chromium host manifest allows it).
        static let chromiumID = "ncnikhcegemmombopokkmfofiobceefk"

        /// Runs `script` as root in a new mount namespace whose mounts do not reach the host.
        func inPrivateMounts(_ script: String, _ arguments: [String]) async throws -> ToolResult {
            try await runTool("/usr/bin/unshare", ["-m", "/bin/bash", "-euo", "pipefail", "-c",
                                                   "mount --make-rprivate /\n" + script, "system-extension-test"] + arguments)
        }

        @Test("Debian's Chromium launcher loads it from /usr/share/chromium/extensions/baton in a new profile",
              .enabled(if: FileManager.default.isExecutableFile(atPath: chromiumPath) && FileManager.default.fileExists(atPath: "/etc/chromium.d/extensions"),
                       "needs Debian's chromium (its launcher reads /etc/chromium.d/extensions; scripts/install-deps installs it)"))
        func chromium() async throws {
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("system-extension-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            // Prints the DevTools targets' URLs of a headless run through the launcher (/usr/bin/chromium,
            // which adds --load-extension for each entry of the directory), once the browser has been up
            // a while; the extension's service worker is a target while it runs.
            let script = """
                work=$1 tree=$2 id=$3
                mount -t tmpfs tmpfs /usr/share/chromium
                mkdir /usr/share/chromium/extensions
                targets() {
                    local profile=$work/$1
                    mkdir -p "$profile"
                    nice -n 19 /usr/bin/chromium --headless=new --no-sandbox --no-first-run --user-data-dir="$profile" \\
                        --remote-debugging-port=0 about:blank > "$profile.log" 2>&1 &
                    local pid=$! port="" seen=""
                    # Up to 60 s for the browser on a loaded machine, then up to 30 s for the worker.
                    for _ in $(seq 600); do [ -s "$profile/DevToolsActivePort" ] && break; sleep 0.1; done
                    port=$(head -n 1 "$profile/DevToolsActivePort")
                    for _ in $(seq 60); do
                        seen=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())' \\
                            "http://127.0.0.1:$port/json/list" | grep -o '"url": "[^"]*"' || true)
                        case "$seen" in *"chrome-extension://$id/"*) break ;; esac
                        [ "$1" = control ] && [ -n "$seen" ] && sleep 5 && break
                        sleep 0.5
                    done
                    kill -KILL "$pid"; wait "$pid" || true
                    echo "$1: $(tr '\\n' ' ' <<<"$seen")"
                }
                targets control
                ln -s "$tree" /usr/share/chromium/extensions/baton
                targets installed
                """
            let result = try await inPrivateMounts(script, [work.path, Self.extensionTree, Self.chromiumID])
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            let control = try #require(lines.first { $0.hasPrefix("control: ") }, "\(result.stdout)\(result.stderr)")
            let installed = try #require(lines.first { $0.hasPrefix("installed: ") }, "\(result.stdout)\(result.stderr)")
            #expect(control.contains("about:blank"), "the control browser ran: \(control)")
            #expect(!control.contains("chrome-extension://\(Self.chromiumID)/"), "loaded without the link: \(control)")
            #expect(installed.contains("chrome-extension://\(Self.chromiumID)/background.js"), "\(installed)")
        }

        @Test("Firefox ESR loads it unsigned from the system scope, in a profile made before the install too",
              .enabled(if: FileManager.default.isExecutableFile(atPath: firefoxPath) && FileManager.default.fileExists(atPath: "/usr/share/mozilla/extensions"),
                       "needs Debian's firefox-esr (scripts/install-deps installs it)"))
        func firefoxESR() async throws {
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("system-extension-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            // Prints, after each run, how the profile's extensions.json records browser-host@baton.org
            // (location and active) or "absent". The same profile runs before and after the link.
            let script = """
                work=$1 tree=$2
                app='{ec8030f7-c20a-464f-9b0e-13a3a9e97384}'
                mount -t tmpfs tmpfs /usr/share/mozilla
                mkdir -p "/usr/share/mozilla/extensions/$app"
                mkdir -p "$work/home" "$work/profile"
                state() {
                    python3 -c 'import json, sys
                addons = json.load(open(sys.argv[1])).get("addons", [])
                found = [a for a in addons if a["id"] == "browser-host@baton.org"]
                print(" ".join("%s active=%s" % (a["location"], a["active"]) for a in found) or "absent")' "$work/profile/extensions.json" 2>/dev/null || echo "no extensions.json"
                }
                run() {
                    HOME=$work/home nice -n 19 /usr/bin/firefox-esr --headless --no-remote --profile "$work/profile" about:blank > "$work/$1.log" 2>&1 &
                    local pid=$!
                    # Up to 90 s for the add-on database, then a few seconds more for it to settle.
                    for _ in $(seq 180); do
                        case "$(state)" in "no extensions.json") ;; *) [ "$1" = control ] && break; [ "$(state)" != absent ] && break ;; esac
                        sleep 0.5
                    done
                    sleep 3
                    kill -KILL "$pid"; wait "$pid" || true
                    echo "$1: $(state)"
                }
                run control
                ln -s "$tree" "/usr/share/mozilla/extensions/$app/browser-host@baton.org"
                run installed
                """
            let result = try await inPrivateMounts(script, [work.path, Self.extensionTree])
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(lines.contains("control: absent"), "\(result.stdout)\(result.stderr)")
            #expect(lines.contains("installed: app-system-share active=True"), "\(result.stdout)\(result.stderr)")
        }
    }
}
