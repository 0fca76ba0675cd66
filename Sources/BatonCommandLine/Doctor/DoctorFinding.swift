// SPDX-License-Identifier: GPL-2.0-or-later
/// One line of `baton doctor`: what was checked, how it went, and for anything not ok the exact
/// thing to do about it.
public struct DoctorFinding: Sendable, Equatable {
    public enum Result: String, Sendable {
        case ok, warning, failed
        /// Not checked because an earlier line failed (that line says what to do).
        case skipped
    }

    /// A stable identifier: adapter, bluetoothd, batond, privacy, ring, handled-types, permissions, notifications, agent, browser, clipboard.
    public var check: String
    public var result: Result
    public var detail: String
    /// What to run or change; nil when ok or skipped.
    public var fix: String?

    public init(_ check: String, _ result: Result, _ detail: String, fix: String? = nil) {
        self.check = check
        self.result = result
        self.detail = detail
        self.fix = fix
    }

    /// Doctor's exit status: 1 when any check failed (warnings do not fail it).
    public static func exitStatus(_ findings: [DoctorFinding]) -> Int32 {
        findings.contains { $0.result == .failed } ? ExitStatus.failure : ExitStatus.success
    }

    /// "ok       adapter        hci0 ... \n         fix: ..." lines, columns aligned.
    public static func text(_ findings: [DoctorFinding]) -> String {
        var width = 0
        for finding in findings { width = max(width, finding.check.count) }
        var lines: [String] = []
        for finding in findings {
            let label = finding.result == .failed ? "FAILED" : finding.result.rawValue
            let pad = { (text: String, to: Int) in text + String(repeating: " ", count: max(1, to - text.count)) }
            lines.append(pad(label, 9) + pad(finding.check, width + 2) + finding.detail)
            if let fix = finding.fix { lines.append(String(repeating: " ", count: 9) + "fix: " + fix) }
        }
        return lines.joined(separator: "\n")
    }
}

extension OutputDocument {
    /// `baton --json doctor`: the findings in the order they were checked.
    public static func doctor(_ findings: [DoctorFinding]) -> JSONValue {
        .array(findings.map { finding in
            var members: Members = [("Check", .string(finding.check)), ("Result", .string(finding.result.rawValue)),
                                    ("Detail", .string(finding.detail))]
            if let fix = finding.fix { members.append(("Fix", .string(fix))) }
            return .object(members)
        })
    }
}
