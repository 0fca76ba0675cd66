// SPDX-License-Identifier: GPL-2.0-or-later
import BatonPublishers
import BatonReadiness
import BatonSystem
import Dispatch
import Glibc

/// A timer on `queue` that fires once after `duration` (only while a transfer waits for its other side).
func makeOneShotTimer(on queue: DispatchQueue, after duration: Duration, _ handler: @escaping @Sendable () -> Void)
    -> any DispatchSourceTimer {
    let (seconds, attoseconds) = duration.components
    let nanoseconds = Int(clamping: seconds) &* 1_000_000_000 &+ Int(attoseconds / 1_000_000_000)
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(deadline: .now() + .nanoseconds(max(0, nanoseconds)))
    timer.setEventHandler(handler: handler)
    timer.activate()
    return timer
}

/// Sets O_NONBLOCK on a descriptor another process may share (a pipe's end): a slow peer must not
/// hold the queue.
func makeNonBlocking(_ descriptor: Int32) {
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
}

/// A pipe, both ends close-on-exec, the read end non-blocking; the numbers are the caller's to close.
func makeReceivePipe() -> (reader: Int32, writer: Int32)? {
    guard let pipe = try? FileDescriptor.pipe() else { return nil }
    let reader = pipe.reader.release()
    let writer = pipe.writer.release()
    makeNonBlocking(reader)
    return (reader, writer)
}

/// Reads the answer of the client that copied from the read end of a pipe until it closes its end:
/// at most `limit` bytes (one more fails the read before more is taken), each read within
/// `timeout` of the last; no bytes at all is `.refused`. Confined to `queue`; its owner keeps it until it finishes.
final class PipeReader: @unchecked Sendable {
    private let queue: DispatchQueue
    private let limit: Int
    private let timeout: Duration
    private var buffer: [UInt8] = []
    private var source: (any DispatchSourceRead)?
    private var timer: (any DispatchSourceTimer)?
    private var completion: ((Result<[UInt8], ClipboardError>) -> Void)?
    /// Bytes taken at every progress, for the timer to see whether any came since it was armed.
    private var progress = 0

    /// Nil when the descriptor cannot be watched (descriptor limit); then `descriptor` is closed.
    init?(descriptor: Int32, limit: Int, timeout: Duration, queue: DispatchQueue,
          completion: @escaping (Result<[UInt8], ClipboardError>) -> Void) {
        self.queue = queue
        self.limit = limit
        self.timeout = timeout
        self.completion = completion
        guard let source = makeReadinessSource(watching: descriptor, for: .readable, queue: queue, onCancel: {
            closeDescriptor(descriptor)
        }) else {
            closeDescriptor(descriptor)
            return nil
        }
        self.source = source
        source.setEventHandler { [weak self] in self?.readable(descriptor) }
        source.activate()
        armTimer()
    }

    private func armTimer() {
        timer?.cancel()
        let seen = progress
        timer = makeOneShotTimer(on: queue, after: timeout) { [weak self] in
            guard let self, progress == seen else { return }
            finish(.failure(.timedOut))
        }
    }

    private func readable(_ descriptor: Int32) {
        guard completion != nil else { return }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        // At most one byte past the limit: enough to know it is over, never more buffered.
        let room = min(chunk.count, limit + 1 - buffer.count)
        let count = chunk.withUnsafeMutableBytes { bytes in retryingInterrupts { read(descriptor, bytes.baseAddress, room) } }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            return finish(.failure(.refused))
        }
        // Wayland has no refusal: a client that cannot answer closes the pipe unwritten. Nothing
        // at all reads as refused (an empty copy is no content either).
        guard count > 0 else { return finish(buffer.isEmpty ? .failure(.refused) : .success(buffer)) }
        guard buffer.count + count <= limit else { return finish(.failure(.overLimit(limit: limit))) }
        buffer.append(contentsOf: chunk[0..<count])
        progress += count
        armTimer()
    }

    /// Ends the read (the descriptor closes once the readiness source stopped watching it).
    func finish(_ result: Result<[UInt8], ClipboardError>) {
        guard let completion else { return }
        self.completion = nil
        timer?.cancel()
        timer = nil
        source?.cancel()
        source = nil
        buffer = []
        completion(result)
    }
}

/// Writes our bytes to the pipe a pasting client handed over, without blocking: a chunk whenever
/// the pipe has room, each within `timeout` of the last, then closes it. Confined to `queue`.
final class PipeWriter: @unchecked Sendable {
    private let queue: DispatchQueue
    private let bytes: [UInt8]
    private let timeout: Duration
    private var sent = 0
    private var source: (any DispatchSourceRead)?
    private var timer: (any DispatchSourceTimer)?
    private var onEnd: ((Bool) -> Void)?

    /// `onEnd(true)` once every byte went, `onEnd(false)` when the reader left or stalled.
    init(descriptor: Int32, bytes: [UInt8], timeout: Duration, queue: DispatchQueue, onEnd: @escaping (Bool) -> Void) {
        self.queue = queue
        self.bytes = bytes
        self.timeout = timeout
        self.onEnd = onEnd
        makeNonBlocking(descriptor)
        guard !bytes.isEmpty, let source = makeReadinessSource(watching: descriptor, for: .writable, queue: queue, onCancel: {
            closeDescriptor(descriptor)
        }) else {
            closeDescriptor(descriptor)
            queue.async { [self] in finish(bytes.isEmpty) }
            return
        }
        self.source = source
        source.setEventHandler { [weak self] in self?.writable(descriptor) }
        source.activate()
        armTimer()
    }

    private func armTimer() {
        timer?.cancel()
        let seen = sent
        timer = makeOneShotTimer(on: queue, after: timeout) { [weak self] in
            guard let self, sent == seen else { return }
            finish(false)
        }
    }

    private func writable(_ descriptor: Int32) {
        guard onEnd != nil else { return }
        let count = bytes.withUnsafeBytes { all in
            retryingInterrupts { write(descriptor, all.baseAddress! + sent, min(all.count - sent, 64 << 10)) }
        }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            return finish(false)  // EPIPE: the pasting client closed its end (SIGPIPE is ignored)
        }
        sent += count
        if sent == bytes.count { return finish(true) }
        armTimer()
    }

    func finish(_ complete: Bool) {
        guard let onEnd else { return }
        self.onEnd = nil
        timer?.cancel()
        timer = nil
        source?.cancel()
        source = nil
        onEnd(complete)
    }
}
