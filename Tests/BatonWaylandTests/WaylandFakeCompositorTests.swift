// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonWayland
import BatonWaylandFakes
import Foundation
import Testing

@Suite("BatonWaylandTests: what headless sway cannot show, against FakeCompositor (issue 27)")
struct WaylandFakeCompositorTests {
    private static let seat = (interface: "wl_seat", version: UInt32(7))

    @Test("ext-data-control is preferred when the compositor offers both; only the seat and that manager are bound")
    func prefersExt() async throws {
        let compositor = try FakeCompositor(globals: [Self.seat, ("zwlr_data_control_manager_v1", 2), ("ext_data_control_manager_v1", 1)])
        defer { compositor.stop() }
        let environment = compositor.environment
        let answer = try await onThread { waylandDataControlAvailability(environment: environment, timeout: .seconds(120)) }
        #expect(answer == .available(.ext, version: 1))
        let clipboard = try await onThread { try WaylandSessionClipboard(environment: environment, configuration: .patient) }
        defer { clipboard.close() }
        #expect(clipboard.dataControlProtocol == .ext)
        #expect(compositor.bound == ["wl_seat@1", "ext_data_control_manager_v1@1"])
    }

    @Test("a compositor without data control: noDataControl, Mutter told by its gtk_shell1 global, and the adapter refuses with a reason",
          arguments: [(true, WaylandCompositor.mutter), (false, .other)])
    func noDataControl(announcesGtkShell: Bool, compositor expected: WaylandCompositor) async throws {
        let compositor = try FakeCompositor(globals: [Self.seat, ("wl_data_device_manager", 3)] + (announcesGtkShell ? [("gtk_shell1", 5)] : []))
        defer { compositor.stop() }
        let environment = compositor.environment
        let answer = try await onThread { waylandDataControlAvailability(environment: environment, timeout: .seconds(120)) }
        #expect(answer == .noDataControl(expected))
        #expect(answer.description.contains("GNOME") == (expected == .mutter))
        let refusal = try await onThread { () -> ClipboardError? in
            do throws(ClipboardError) {
                _ = try WaylandSessionClipboard(environment: environment, configuration: .patient)
                return nil
            } catch {
                return error
            }
        }
        #expect(refusal == .unavailable(WaylandDataControlAvailability.noDataControl(expected).description))
        #expect(compositor.bound.isEmpty)
    }

    @Test("a message with a broken size from the compositor closes the adapter: the stream finishes, calls fail")
    func brokenBytes() async throws {
        // The adapter's start takes two syncs; its offer sends the third, after which the bytes break.
        let compositor = try FakeCompositor(globals: [Self.seat, ("zwlr_data_control_manager_v1", 2)], behaviour: .brokenAfterSyncs(3))
        defer { compositor.stop() }
        let environment = compositor.environment
        let clipboard = try await onThread { try WaylandSessionClipboard(environment: environment, configuration: .patient) }
        defer { clipboard.close() }
        let recorder = EventRecorder(clipboard.events)
        _ = try? await clipboard.offer(types: [ClipboardTypes.text]) { _ in [] }
        #expect(await recorder.next() == nil)
        #expect(await recorder.isFinished)
        await #expect(throws: ClipboardError.unavailable("the Wayland compositor sent a message of 4 bytes")) {
            try await clipboard.read(type: ClipboardTypes.text, limit: 16)
        }
    }
}
