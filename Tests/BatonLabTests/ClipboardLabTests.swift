// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonTestBus
import BatonX11
import Foundation
import Synchronization
import Testing

/// Issue 27's lab proof: the universal clipboard with real clients, real bluetoothd and ordinary
/// users. In the lab's systemd boot two batond run as root on the system bus (alpha as
/// org.baton.alpha on hci0, beta as org.baton on hci1), paired over TCP; the adverts go over the
/// virtual air. baton-desk (tty1's session) has a desktop on each machine: alpha's Xvfb with its own
/// runtime and config directories and session bus, and beta's Xvfb (later a headless sway) in its
/// login session; baton-other (tty2) has its own desktop on beta. Each runs baton-agent with the
/// clipboard turned on (`baton clipboard enable`). xclip copies on alpha; xclip -o and wl-paste
/// paste on beta. `baton clipboard status` (batond's Clipboard1.GetStatus) and a dbus-monitor of
/// the system bus show from outside when the bytes left: only at the paste.
/// Copies of files (`xclip -t text/uri-list` on alpha) are pasted with `xclip -o -t text/uri-list`
/// and `wl-paste -t text/uri-list` on beta; the monitor shows no file asked for (OpenFile, PasteFile)
/// before the paste. Alone: `scripts/lab/test --init systemd -- --filter ClipboardLabTests`.
@Suite(.serialized, .enabled(if: Lab.isInside && ProcessInfo.processInfo.environment["LAB_INIT"] == "systemd",
                             "needs the lab's systemd boot (scripts/lab/run --init systemd)"))
struct ClipboardLabTests {
    static let systemBus = DesktopSessionLabTests.systemBus
    static let textType = "text/plain;charset=utf-8"

    /// An X display for a seat: Xvfb started in its session, ready once its socket is there.
    func xvfb(_ seat: ClipboardSeat, display: Int, lab: DaemonPair) async throws -> DeskSession.Job {
        let job = try await seat.start("xvfb\(display)", "/usr/bin/Xvfb :\(display) -screen 0 640x480x24 -nolisten tcp")
        #expect(await lab.eventually(60) { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)") }, "\(job.log)")
        return job
    }

    /// Turns the clipboard on for the seat and starts its agent; waits until batond has it registered.
    func agent(_ seat: ClipboardSeat, lab: DaemonPair) async throws -> DeskSession.Job {
        let (code, out, err) = try await seat.run("enable", seat.baton("clipboard enable"))
        #expect(code == 0 && out.contains("clipboard: on"), "\(out)\(err)")
        let job = try await seat.start("agent", "\(DeskSession.quote(product("baton-agent"))) --bus system --bus-name \(seat.busName)")
        var status: ClipboardLabStatus?
        #expect(await lab.eventually(120) {
            status = try? await seat.status()
            return status?.agentRegistered == true && status?.daemonRegistered == true
        }, "\(status?.text ?? "")\n\(job.log)")
        return job
    }

    /// Polls `seat`'s status until `condition` holds (at most `seconds`); the last status.
    @discardableResult
    func until(_ seat: ClipboardSeat, _ seconds: Double = 120, lab: DaemonPair, line: Int = #line,
               _ condition: @escaping (ClipboardLabStatus) -> Bool) async -> ClipboardLabStatus? {
        var last: ClipboardLabStatus?
        let held = await lab.eventually(seconds, line: line) {
            last = try? await seat.status()
            return last.map(condition) ?? false
        }
        #expect(held, "\(last?.text ?? "no status")", sourceLocation: SourceLocation(fileID: #fileID, filePath: #filePath, line: line, column: 1))
        return last
    }

    @Test func xclipAndWlPasteOnBetaGetAlphasCopyOnlyAtThePasteAndNothingCrossesToAnotherUser() async throws {
        #expect(ClipboardLab.missingPrograms.isEmpty, "install: \(ClipboardLab.missingPrograms.joined(separator: ", ")) (scripts/install-deps)")
        try #require(ClipboardLab.missingPrograms.isEmpty)
        let desk = try await DeskSession.open(tty: "tty1", user: "baton-desk")
        let other = try await DeskSession.open(tty: "tty2", user: "baton-other")
        let monitor = try ClipboardBusMonitor()
        defer { monitor.stop() }

        let lab = try DaemonPair(systemBus: Self.systemBus, busNames: ["beta": "org.baton"])
        defer { lab.stop() }
        try lab.start(name: "alpha", adapter: "hci0", extraArguments: ["--port", "47321"])
        try lab.start(name: "beta", adapter: "hci1")
        #expect(await lab.eventually(60) { (try? await lab.cli("bt-pair", "beta", ["list"]))?.0 == 0 }, "\(lab.log("beta"))")
        try await TwoDaemonsLabTests().pairOverTCP(lab)

        // alpha's desktop of baton-desk: directories and a session bus of its own, as on its own machine.
        let alphaHome = desk.home + "/alpha"
        let (made, _, madeErr) = try await desk.run("alpha-dirs", "mkdir -p \(alphaHome)/run \(alphaHome)/config \(alphaHome)/cache && chmod 700 \(alphaHome)/run")
        #expect(made == 0, "\(madeErr)")
        var jobs: [DeskSession.Job] = []
        // Stopped in the end, and waited for: a later test in this boot starts its own agent in the
        // same session (a second one would exit at once).
        defer {
            for job in jobs.reversed() { job.stop() }
            for _ in 0..<100 where jobs.contains(where: \.isRunning) { usleep(100_000) }
        }
        jobs.append(try await desk.start("alpha-bus", "/usr/bin/dbus-daemon --session --nofork --address=unix:path=\(alphaHome)/bus"))
        #expect(await lab.eventually(60) { FileManager.default.fileExists(atPath: alphaHome + "/bus") })
        let alpha = ClipboardSeat(label: "alpha (baton-desk)", session: desk, busName: "org.baton.alpha", environment: [
            "DISPLAY": ":11", "XDG_RUNTIME_DIR": alphaHome + "/run", "XDG_CONFIG_HOME": alphaHome + "/config", "XDG_CACHE_HOME": alphaHome + "/cache",
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=\(alphaHome)/bus"])
        // beta's desktops: baton-desk's login session, and baton-other's.
        let beta = ClipboardSeat(label: "beta (baton-desk)", session: desk, busName: "org.baton", environment: ["DISPLAY": ":12"])
        let outsider = ClipboardSeat(label: "beta (baton-other)", session: other, busName: "org.baton", environment: ["DISPLAY": ":13"])
        jobs.append(try await xvfb(alpha, display: 11, lab: lab))
        jobs.append(try await xvfb(beta, display: 12, lab: lab))
        jobs.append(try await xvfb(outsider, display: 13, lab: lab))
        let alphaAgent = try await agent(alpha, lab: lab)
        var betaAgent = try await agent(beta, lab: lab)
        let outsiderAgent = try await agent(outsider, lab: lab)
        jobs += [alphaAgent, betaAgent, outsiderAgent]
        let agents = await monitor.resolveAgents()
        let deskUID = try #require(getpwnam("baton-desk")?.pointee.pw_uid), otherUID = try #require(getpwnam("baton-other")?.pointee.pw_uid)
        #expect(agents.values.filter { $0 == deskUID }.count == 2 && agents.values.filter { $0 == otherUID }.count == 1, "\(agents)\n\(monitor.log)")
        let logs = { "\(lab.log("alpha"))\n\(lab.log("beta"))\n\(alphaAgent.log)\n\(betaAgent.log)\n\(outsiderAgent.log)\n\(monitor.log)\n\(lab.timeline)" }

        /// The seat whose agent takes alpha's copies (beta's X11 session, later its Wayland one).
        var receiver = beta
        /// Copies `file` on alpha with xclip (`type`: its target), then waits until alpha offers it
        /// and beta's agent of baton-desk (`receiver`'s) was handed it; returns alpha's status when the
        /// offer was first seen, and after beta took it (before any paste).
        func copyOnAlpha(_ file: String, type: String? = nil, kind: String, restrict: String? = nil) async throws
            -> (offered: ClipboardLabStatus?, taken: ClipboardLabStatus?) {
            let target = type.map { " -t \($0)" } ?? ""
            let (code, _, err) = try await alpha.run("xclip", "/usr/bin/xclip -selection clipboard\(target) -i \(file)" + (restrict.map { "\n" + $0 } ?? ""))
            #expect(code == 0, "\(err)")
            let offered = await until(alpha, lab: lab) { $0.offerKind == kind }
            _ = await until(receiver, lab: lab) { $0.takenFrom == "alpha" && $0.takenKind == kind && ($0.agentTaken ?? "").contains("from alpha") }
            return (offered, try await alpha.status())
        }
        /// The copy beta's agent of baton-desk holds now (its token), from the monitor.
        func pastes() -> [ClipboardBusMonitor.Call] { monitor.calls.filter { $0.member == "Paste" } }
        /// Files asked for: batond asking alpha's agent for a file (ClipboardAgent1.OpenFile), beta's
        /// agent asking batond for one (Clipboard1.PasteFile).
        func fileCalls() -> [ClipboardBusMonitor.Call] { monitor.calls.filter { $0.member == "OpenFile" || $0.member == "PasteFile" } }
        /// beta's folder of local copies of the copy of files handed over last, and its token.
        func filesFolder() throws -> (String, UInt64) {
            let token = try #require(monitor.calls.last { $0.member == "OfferedFiles" }?.token, "\(monitor.log)")
            return (desk.home + "/.cache/baton/clipboard/" + String(token, radix: 16), token)
        }

        // 1. Text: xclip on alpha; beta's agent takes it and nothing of it crosses; xclip -o on beta pastes it.
        let text = Array("Grüße aus alpha, \(UUID().uuidString)\n".utf8)
        try await ClipboardLab.write(text, to: desk.home + "/lab/copy.txt", owner: "baton-desk")
        var before = try await copyOnAlpha(desk.home + "/lab/copy.txt", kind: "text").taken
        #expect(before?.askedBy == ["beta"] && before?.pastedOn == [] && before?.pastesAnswered == 0, "\(before?.text ?? "")")
        #expect(pastes().isEmpty, "\(monitor.log)")
        print("LAB clipboard text: alpha offers it, asked for by \(before?.askedBy ?? []), pasted on \(before?.pastedOn ?? []) before the paste")
        let (pastedCode, pasted, pasteErr) = try await beta.run("paste", "/usr/bin/xclip -selection clipboard -o")
        #expect(pastedCode == 0 && Array(pasted.utf8) == text, "\(pasted)\(pasteErr)\n\(logs())")
        var after = await until(alpha, lab: lab) { $0.pastedOn == ["beta \(Self.textType) \(text.count)"] }
        #expect(after?.pastesAnswered == 1 && pastes().count == 1, "\(monitor.log)")
        print("LAB clipboard text: xclip -o on beta returned the \(text.count) bytes; alpha: pasted on \(after?.pastedOn ?? []), pastes answered \(after?.pastesAnswered ?? -1)")
        let (_, words, _) = try await alpha.run("status-words", alpha.baton("clipboard status"))
        #expect(words.contains("; pasted on beta (\(Self.textType), \(text.count) bytes)"), "\(words)")
        print("LAB clipboard text: `baton clipboard status` on alpha says:\n" + words.split(separator: "\n").filter { $0.hasPrefix("batond") || $0.hasPrefix("since") }.joined(separator: "\n"))

        // 2. A PNG (about 350 KB: INCR on both displays), by its media type.
        let png = try await ClipboardLab.makePNG(at: desk.home + "/lab/copy.png", width: 340, height: 340, owner: "baton-desk")
        before = try await copyOnAlpha(desk.home + "/lab/copy.png", type: "image/png", kind: "image").taken
        #expect(before?.pastedOn == [] && before?.pastesAnswered == 1 && pastes().count == 1, "\(before?.text ?? "")\n\(monitor.log)")
        let pngOut = desk.home + "/lab/pasted.png"
        let (pngCode, _, pngErr) = try await beta.run("paste-png", "/usr/bin/xclip -selection clipboard -o -t image/png > \(pngOut)")
        let pastedPNG = Array((try? Data(contentsOf: URL(fileURLWithPath: pngOut))) ?? Data())
        #expect(pngCode == 0 && pastedPNG == png, "\(pastedPNG.count) of \(png.count) bytes: \(pngErr)\n\(logs())")
        after = await until(alpha, lab: lab) { $0.pastedOn == ["beta image/png \(png.count)"] }
        print("LAB clipboard PNG: xclip -o -t image/png on beta returned the \(png.count) bytes (equal: \(pastedPNG == png)); alpha: pasted on \(after?.pastedOn ?? [])")

        // The other account on beta was handed nothing, and cannot paste baton-desk's copy by its token.
        let offered = monitor.calls.filter { $0.member == "Offered" }
        #expect(offered.count == 2 && offered.allSatisfy { agents[$0.destination] == deskUID }, "\(monitor.log)")
        let token = try #require(offered.last?.token)
        let (stolen, _, stolenErr) = try await outsider.run("steal", "/usr/bin/dbus-send --system --print-reply --dest=org.baton /org/baton/clipboard "
                                                             + "org.baton.Clipboard1.Paste uint64:\(token) string:image/png")
        #expect(stolen != 0 && stolenErr.contains("no such copy for this account"), "\(stolenErr)")
        var outsiderStatus = try await outsider.status()
        #expect(outsiderStatus.agentRegistered && outsiderStatus.agentTaken == nil && outsiderStatus.taken == nil, "\(outsiderStatus)")
        let (outsiderPaste, outsiderOut, _) = try await outsider.run("paste", "/usr/bin/xclip -selection clipboard -o -t image/png | wc -c")
        #expect(outsiderPaste == 0 && outsiderOut.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(outsiderOut)")
        print("LAB clipboard other user: baton-other's agent on beta was handed \(offered.filter { agents[$0.destination] == otherUID }.count) copies; its Paste with baton-desk's token: \(stolenErr.trimmingCharacters(in: .whitespacesAndNewlines))")

        // 2b. Files: two files of baton-desk's on alpha (a text, 300 KiB of noise) copied as a
        //     text/uri-list. Only their list crosses with the offer; each file's bytes at the paste.
        let files = try await ClipboardLabFiles.make(in: desk.home + "/lab", owner: "baton-desk")
        before = try await copyOnAlpha(files.list, type: "text/uri-list", kind: "files").taken
        var folder = try filesFolder().0
        let filesToken = try filesFolder().1
        #expect(before?.askedBy == ["beta"] && before?.pastedOn == [] && fileCalls().isEmpty, "\(before?.text ?? "")\n\(monitor.log)")
        #expect(!FileManager.default.fileExists(atPath: folder), "beta holds files before the paste")
        print("LAB clipboard files: alpha offers 2 files (\(files.sizes.joined(separator: " and ")) bytes), asked for by \(before?.askedBy ?? []), "
              + "pasted on \(before?.pastedOn ?? []), \(fileCalls().count) OpenFile/PasteFile calls before the paste")
        let (filesCode, filesOut, filesErr) = try await beta.run("paste-files", "/usr/bin/xclip -selection clipboard -o -t text/uri-list")
        #expect(filesCode == 0 && files.mismatch(filesOut, under: folder) == nil, "\(files.mismatch(filesOut, under: folder) ?? "")\(filesErr)\n\(logs())")
        after = await until(alpha, lab: lab) { $0.pastedOn.count == 2 }
        #expect(after?.pastedOn.allSatisfy { $0.hasPrefix("beta ") } == true && after?.pastedOn.map { String($0.split(separator: " ").last ?? "") }.sorted() == files.sizes.sorted(),
                "\(after?.text ?? "")")
        #expect(fileCalls().filter { $0.member == "OpenFile" }.count == 2 && fileCalls().filter { $0.member == "PasteFile" }.count == 2, "\(monitor.log)")
        // GNOME's list names the same local copies ("copy", never "cut"); nothing crosses again.
        let (gnomeCode, gnomeOut, _) = try await beta.run("paste-gnome-files", "/usr/bin/xclip -selection clipboard -o -t x-special/gnome-copied-files")
        #expect(gnomeCode == 0 && gnomeOut.hasPrefix("copy\n") && ClipboardLabFiles.localPaths(gnomeOut) == ClipboardLabFiles.localPaths(filesOut), "\(gnomeOut)")
        #expect(fileCalls().count == 4, "\(monitor.log)")
        let (_, filesWords, _) = try await alpha.run("status-words-files", alpha.baton("clipboard status"))
        print("LAB clipboard files: xclip -o -t text/uri-list on beta returned \(ClipboardLabFiles.localPaths(filesOut)), bytes equal to alpha's: "
              + "\(files.mismatch(filesOut, under: folder) == nil); \(fileCalls().count) OpenFile/PasteFile calls after it; `baton clipboard status` on alpha says:\n"
              + filesWords.split(separator: "\n").filter { $0.hasPrefix("batond") }.joined(separator: "\n"))
        // baton-other on beta: handed nothing, gets nothing, and cannot pull baton-desk's files by the token.
        let (stolenFile, _, stolenFileErr) = try await outsider.run("steal-file", "/usr/bin/dbus-send --system --print-reply --dest=org.baton /org/baton/clipboard "
                                                                     + "org.baton.Clipboard1.PasteFile uint64:\(filesToken) uint32:1")
        #expect(stolenFile != 0 && stolenFileErr.contains("no such copy for this account"), "\(stolenFileErr)")
        let (outsiderFiles, outsiderFilesOut, _) = try await outsider.run("paste-files", "/usr/bin/xclip -selection clipboard -o -t text/uri-list | wc -c")
        #expect(outsiderFiles == 0 && outsiderFilesOut.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(outsiderFilesOut)")
        // (Its refused PasteFile is on the monitor; no file was asked of alpha's agent for it.)
        #expect(monitor.calls.filter { $0.member == "OfferedFiles" }.allSatisfy { agents[$0.destination] == deskUID }
                && monitor.calls.filter { $0.member == "OpenFile" }.count == 2, "\(monitor.log)")
        print("LAB clipboard files: baton-other's PasteFile with baton-desk's token: \(stolenFileErr.trimmingCharacters(in: .whitespacesAndNewlines))")

        // 3. A copy marked secret (KDE's hint, as KeePassXC sets it): alpha's agent reads only the
        //    hint, offers nothing and takes the copy of files back; beta's agent gives the clipboard up.
        let provided = Mutex<[String]>([])
        let manager = try X11SessionClipboard(display: ":11")
        defer { manager.close() }
        let answeredBefore = try await alpha.status().offersAnswered
        try await manager.offer(types: [ClipboardTypes.text, ClipboardSecrecy.kdePasswordManagerHint]) { type in
            provided.withLock { $0.append(type) }
            return type == ClipboardSecrecy.kdePasswordManagerHint ? Array("secret".utf8) : Array("hunter2".utf8)
        }
        _ = await until(alpha, lab: lab) { $0.offer == nil }
        _ = await until(beta, lab: lab) { $0.taken == nil && $0.agentTaken == nil }
        #expect(!provided.withLock { $0 }.contains(ClipboardTypes.text), "the secret's text was read")
        #expect(alphaAgent.log.contains("marked secret"), "\(alphaAgent.log)")
        let (secretCode, secretOut, _) = try await beta.run("paste-secret", "/usr/bin/xclip -selection clipboard -o")
        #expect(secretCode != 0 && !secretOut.contains("hunter2"), "\(secretOut)")
        #expect(try await alpha.status().offersAnswered == answeredBefore && monitor.calls.filter { $0.member == "Offered" }.count == 2, "\(monitor.log)")
        print("LAB clipboard secret: alpha offers nothing (read of the hint only: \(provided.withLock { $0 })), beta's clipboard has nothing, Offered calls still \(monitor.calls.filter { $0.member == "Offered" }.count)")

        // 4a. An offer an app shortened to 30 s (Clipboard1.Restrict right after the copy): beta takes
        //     it, and at its expiry alpha offers nothing and beta's agent gives the clipboard up.
        let restrict = "/usr/bin/dbus-send --system --print-reply --dest=org.baton.alpha /org/baton/clipboard org.baton.Clipboard1.Restrict boolean:false uint32:"
        try await ClipboardLab.write(Array("short-lived \(UUID().uuidString)".utf8), to: desk.home + "/lab/short.txt", owner: "baton-desk")
        let shortLived = try await copyOnAlpha(desk.home + "/lab/short.txt", kind: "text", restrict: restrict + "30").offered
        #expect((shortLived?.offerExpiresIn ?? 999) <= 30, "the restriction did not apply: \(shortLived?.text ?? "")")
        let expiredToken = try #require(monitor.calls.last { $0.member == "Offered" }?.token)
        _ = await until(alpha, 60, lab: lab) { $0.offer == nil }
        _ = await until(beta, 60, lab: lab) { $0.taken == nil && $0.agentTaken == nil }
        #expect(monitor.calls.contains { $0.member == "Withdrawn" && $0.token == expiredToken }, "\(monitor.log)")
        let (expiredCode, expiredOut, _) = try await beta.run("paste-expired", "/usr/bin/xclip -selection clipboard -o")
        #expect(expiredCode != 0 && !expiredOut.contains("short-lived"), "\(expiredOut)")
        print("LAB clipboard expiry: an offer restricted to \(shortLived?.offerExpiresIn ?? -1) s was taken by beta and withdrawn there at its expiry; xclip -o on beta then got nothing")

        // 4b. A copy that expires while beta is out of range (hci1 off) is not offered to beta when it comes back.
        #expect(try Lab.runHelper(["power", "hci1", "off"]) == 0)
        let offeredBefore = monitor.calls.filter { $0.member == "Offered" }.count
        let answeredBeforeAway = try await alpha.status().offersAnswered
        try await ClipboardLab.write(Array("while away \(UUID().uuidString)".utf8), to: desk.home + "/lab/away.txt", owner: "baton-desk")
        let (awayCode, _, awayErr) = try await alpha.run("xclip-away", "/usr/bin/xclip -selection clipboard -i \(desk.home)/lab/away.txt\n\(restrict)20")
        #expect(awayCode == 0, "\(awayErr)")
        let away = await until(alpha, 20, lab: lab) { $0.offerKind == "text" }
        #expect((away?.offerExpiresIn ?? 999) <= 20, "the restriction did not apply: \(away?.text ?? "")")
        _ = await until(alpha, 60, lab: lab) { $0.offer == nil }
        let poweredOn = Date()
        #expect(try Lab.runHelper(["power", "hci1", "on"]) == 0)
        // beta hears alpha again (its dump shows alpha's advert heard after the power-on), and asks nothing.
        #expect(await lab.eventually(120) {
            let elapsed = Date().timeIntervalSince(poweredOn) * 1000
            return ((try? await TwoDaemonsLabTests().dump(lab, "beta")) ?? []).contains {
                $0["Kind"] as? String == "ringMember" && Double($0["AgeMs"] as? Int ?? Int.max) < elapsed
            }
        }, "\(logs())")
        try await Task.sleep(for: .seconds(3))
        let afterAway = try await alpha.status()
        #expect(afterAway.offersAnswered == answeredBeforeAway && monitor.calls.filter { $0.member == "Offered" }.count == offeredBefore, "\(afterAway)\n\(monitor.log)")
        let betaAfterAway = try await beta.status()
        #expect(betaAfterAway.taken == nil && betaAfterAway.agentTaken == nil, "\(betaAfterAway)")
        print("LAB clipboard expiry: a copy that expired while beta's controller was off: alpha answered its types \(afterAway.offersAnswered - answeredBeforeAway) times after, beta holds nothing")

        // 5. beta in a Wayland session: headless sway (wlr-data-control) of baton-desk; its agent
        //    takes alpha's next copy, and wl-paste pastes it.
        betaAgent.stop()
        #expect(await lab.eventually(60) { !betaAgent.isRunning })
        let swayRun = desk.home + "/sway-run"
        let (swayDirs, _, swayDirsErr) = try await desk.run("sway-dirs", "mkdir -p \(swayRun) && chmod 700 \(swayRun) && printf 'xwayland disable\\n' > \(swayRun)/config")
        #expect(swayDirs == 0, "\(swayDirsErr)")
        let sway = try await desk.start("sway", "/usr/bin/sway -c \(swayRun)/config", environment: [
            "XDG_RUNTIME_DIR": swayRun, "WLR_BACKENDS": "headless", "WLR_RENDERER": "pixman", "WLR_LIBINPUT_NO_DEVICES": "1"])
        jobs.append(sway)
        var socket: String?
        #expect(await lab.eventually(120) {
            socket = ((try? FileManager.default.contentsOfDirectory(atPath: swayRun)) ?? []).first { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") }
            return socket != nil
        }, "\(sway.log)")
        let waylandBeta = ClipboardSeat(label: "beta (baton-desk, Wayland)", session: desk, busName: "org.baton",
                                        environment: ["WAYLAND_DISPLAY": swayRun + "/" + (socket ?? "wayland-1")])
        betaAgent = try await agent(waylandBeta, lab: lab)
        jobs.append(betaAgent)
        let wayland = try await waylandBeta.status()
        #expect(wayland.sessionClipboard.hasSuffix("(zwlr_data_control_manager_v1)"), "\(wayland)")
        let waylandText = Array("to Wayland, \(UUID().uuidString)".utf8)
        try await ClipboardLab.write(waylandText, to: desk.home + "/lab/wayland.txt", owner: "baton-desk")
        let (waylandCopy, _, waylandCopyErr) = try await alpha.run("xclip-wayland", "/usr/bin/xclip -selection clipboard -i \(desk.home)/lab/wayland.txt")
        #expect(waylandCopy == 0, "\(waylandCopyErr)")
        _ = await until(alpha, lab: lab) { $0.offerKind == "text" }
        _ = await until(waylandBeta, lab: lab) { $0.takenFrom == "alpha" && ($0.agentTaken ?? "").contains("from alpha") }
        before = try await alpha.status()
        #expect(before?.pastedOn == [], "\(before?.text ?? "")")
        let (wlCode, wlOut, wlErr) = try await desk.run("wl-paste", "export XDG_RUNTIME_DIR=\(swayRun) WAYLAND_DISPLAY=\(socket ?? "")\n"
                                                        + "/usr/bin/wl-paste --no-newline -t '\(Self.textType)'")
        #expect(wlCode == 0 && Array(wlOut.utf8) == waylandText, "\(wlOut)\(wlErr)\n\(logs())")
        after = await until(alpha, lab: lab) { $0.pastedOn == ["beta \(Self.textType) \(waylandText.count)"] }
        print("LAB clipboard Wayland: wl-paste under headless sway on beta returned the \(waylandText.count) bytes; alpha: before the paste pasted on \(before?.pastedOn ?? []), after \(after?.pastedOn ?? [])")
        // And the files again (a new copy of them): wl-paste -t text/uri-list gets local copies.
        receiver = waylandBeta
        let fileCallsBefore = fileCalls().count
        before = try await copyOnAlpha(files.list, type: "text/uri-list", kind: "files").taken
        folder = try filesFolder().0
        #expect(before?.pastedOn == [] && fileCalls().count == fileCallsBefore && !FileManager.default.fileExists(atPath: folder), "\(before?.text ?? "")\n\(monitor.log)")
        let (wlFiles, wlFilesOut, wlFilesErr) = try await desk.run("wl-paste-files", "export XDG_RUNTIME_DIR=\(swayRun) WAYLAND_DISPLAY=\(socket ?? "")\n"
                                                                    + "/usr/bin/wl-paste --no-newline -t text/uri-list")
        #expect(wlFiles == 0 && files.mismatch(wlFilesOut, under: folder) == nil, "\(files.mismatch(wlFilesOut, under: folder) ?? "")\(wlFilesErr)\n\(logs())")
        after = await until(alpha, lab: lab) { $0.pastedOn.count == 2 }
        #expect(fileCalls().count == fileCallsBefore + 4, "\(monitor.log)")
        print("LAB clipboard Wayland files: wl-paste -t text/uri-list under headless sway on beta returned \(ClipboardLabFiles.localPaths(wlFilesOut)), bytes equal to "
              + "alpha's: \(files.mismatch(wlFilesOut, under: folder) == nil); alpha: before the paste pasted on \(before?.pastedOn ?? []), after \(after?.pastedOn ?? [])")

        // Throughout: every copy went to baton-desk's agents only.
        outsiderStatus = try await outsider.status()
        let everyAgent = await monitor.resolveAgents()
        let all = monitor.calls.filter { $0.member == "Offered" || $0.member == "OfferedFiles" }
        #expect(outsiderStatus.taken == nil && all.allSatisfy { everyAgent[$0.destination] == deskUID }, "\(everyAgent)\n\(monitor.log)")
        print("LAB clipboard: \(all.count) copies handed over, all to baton-desk's agents; baton-other's agent: none")
    }
}
