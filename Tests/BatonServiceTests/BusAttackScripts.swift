// SPDX-License-Identifier: GPL-2.0-or-later
// The attacker's programs of BusAttackTests, run as another local account (nobody). Python 3 with
// python3-dbus for well-formed calls; a D-Bus client of its own (busAttackRawBus) for what libdbus
// will not send: odd header fields, descriptors in variants, forged replies, pipelined floods.

/// A minimal D-Bus client on a raw socket (EXTERNAL, little-endian marshalling of any value, header fields as given).
let busAttackRawBus = #"""
import os, socket, struct, select, time

def pad(buf, n):
    buf.extend(b"\0" * ((-len(buf)) % n))

def sig_split(sig):
    """The complete types of a signature."""
    out, i = [], 0
    while i < len(sig):
        j = sig_end(sig, i)
        out.append(sig[i:j])
        i = j
    return out

def sig_end(sig, i):
    c = sig[i]
    if c == "a":
        return sig_end(sig, i + 1)
    if c in "({":
        close = ")" if c == "(" else "}"
        i += 1
        while sig[i] != close:
            i = sig_end(sig, i)
        return i + 1
    return i + 1

ALIGN = {"y": 1, "b": 4, "n": 2, "q": 2, "i": 4, "u": 4, "x": 8, "t": 8, "d": 8, "h": 4, "s": 4, "o": 4, "g": 1, "v": 1, "a": 4, "(": 8, "{": 8}

def put(buf, sig, value):
    """Marshals value (little-endian). Strings may be bytes (sent as they are, invalid UTF-8 too).
    A variant is (signature, value); an array a list; a dict entry/struct a tuple."""
    c = sig[0]
    pad(buf, ALIGN[c])
    if c == "y": buf.append(value)
    elif c == "b": buf.extend(struct.pack("<I", 1 if value else 0))
    elif c == "n": buf.extend(struct.pack("<h", value))
    elif c == "q": buf.extend(struct.pack("<H", value))
    elif c == "i": buf.extend(struct.pack("<i", value))
    elif c in "uh": buf.extend(struct.pack("<I", value))
    elif c == "x": buf.extend(struct.pack("<q", value))
    elif c == "t": buf.extend(struct.pack("<Q", value))
    elif c == "d": buf.extend(struct.pack("<d", value))
    elif c in "so":
        b = value if isinstance(value, bytes) else value.encode()
        buf.extend(struct.pack("<I", len(b))); buf.extend(b); buf.append(0)
    elif c == "g":
        b = value.encode()
        buf.append(len(b)); buf.extend(b); buf.append(0)
    elif c == "v":
        inner, v = value
        put(buf, "g", inner)
        put(buf, inner, v)
    elif c == "a":
        elem = sig[1:]
        length_at = len(buf)
        buf.extend(b"\0\0\0\0")
        pad(buf, ALIGN[elem[0]])
        start = len(buf)
        if elem == "y" and isinstance(value, (bytes, bytearray)):
            buf.extend(value)
        else:
            items = value.items() if isinstance(value, dict) else value
            for item in items:
                put(buf, elem, item)
        struct.pack_into("<I", buf, length_at, len(buf) - start)
    elif c in "({":
        for s, v in zip(sig_split(sig[1:-1]), value):
            put(buf, s, v)
    else:
        raise ValueError(sig)

def marshal(sig, values, buf=None):
    buf = bytearray() if buf is None else buf
    for s, v in zip(sig_split(sig), values):
        put(buf, s, v)
    return buf

CALL, RETURN, ERROR, SIGNAL = 1, 2, 3, 4

def message(kind, serial, fields, body_sig="", body=(), flags=0, raw_body=None, extra_fields=b"", endian="l"):
    """fields: list of (code, signature, value); extra_fields: raw bytes appended (8-aligned start)."""
    if body_sig and (1, 8) and not any(code == 8 for code, _, _ in fields):
        fields = fields + [(8, "g", body_sig)]
    body_bytes = bytes(raw_body) if raw_body is not None else bytes(marshal(body_sig, body))
    head = bytearray(b"l" + bytes([kind, flags, 1]) + struct.pack("<II", len(body_bytes), serial))
    farr = bytearray()
    # The array of fields starts at offset 16 (8-aligned): marshal relative to the whole header.
    tmp = bytearray(head) + b"\0\0\0\0"
    for code, sig, value in fields:
        pad(tmp, 8)
        put(tmp, "y", code)
        put(tmp, "g", sig)
        put(tmp, sig, value)
    if extra_fields:
        pad(tmp, 8)
        tmp.extend(extra_fields)
    struct.pack_into("<I", tmp, 12, len(tmp) - 16)
    pad(tmp, 8)
    return bytes(tmp) + body_bytes

def call(serial, dest, path, iface, member, body_sig="", body=(), **kw):
    fields = [(1, "o", path), (3, "s", member), (6, "s", dest)]
    if iface:
        fields.insert(1, (2, "s", iface))
    return message(CALL, serial, fields, body_sig, body, **kw)

class Bus:
    def __init__(self, address):
        path = address.split("path=", 1)[1].split(",")[0]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
        line = self._line()
        assert line.startswith(b"OK"), line
        self.sock.sendall(b"NEGOTIATE_UNIX_FD\r\n")
        assert self._line().startswith(b"AGREE_UNIX_FD")
        self.sock.sendall(b"BEGIN\r\n")
        self.buffer = b""
        self.serial = 1
        self.send(call(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
        reply = self.wait_reply(1, 30)
        self.name = reply["body_string"]
        self.closed = False

    def _line(self):
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = self.sock.recv(1)
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def next_serial(self):
        self.serial += 1
        return self.serial

    def send(self, data, fds=()):
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.sendall(data)

    def read_message(self, timeout):
        """One message as a dict, or None on timeout; raises EOFError when the bus closed us."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= 16:
                body_len, = struct.unpack_from("<I" if self.buffer[0:1] == b"l" else ">I", self.buffer, 4)
                flen, = struct.unpack_from("<I" if self.buffer[0:1] == b"l" else ">I", self.buffer, 12)
                total = 16 + flen + ((-(16 + flen)) % 8) + body_len
                if len(self.buffer) >= total:
                    raw, self.buffer = self.buffer[:total], self.buffer[total:]
                    return parse(raw)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                return None
            msg, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 16)
            for fd in fds:
                os.close(fd)
            if not msg:
                raise EOFError
            self.buffer += msg

    def wait_reply(self, serial, timeout):
        deadline = time.monotonic() + timeout
        while True:
            m = self.read_message(max(0, deadline - time.monotonic()))
            if m is None:
                return None
            if m["type"] in (RETURN, ERROR) and m.get(5) == serial:
                return m

def parse(raw):
    little = raw[0:1] == b"l"
    e = "<" if little else ">"
    kind = raw[1]
    serial, = struct.unpack_from(e + "I", raw, 8)
    flen, = struct.unpack_from(e + "I", raw, 12)
    out = {"type": kind, "serial": serial}
    pos, end = 16, 16 + flen
    while pos < end:
        pos += (-pos) % 8
        if pos >= end:
            break
        code = raw[pos]; slen = raw[pos + 1]; sig = raw[pos + 2:pos + 2 + slen].decode(); pos += 3 + slen
        if sig in ("s", "o"):
            pos += (-pos) % 4
            n, = struct.unpack_from(e + "I", raw, pos); out[code] = raw[pos + 4:pos + 4 + n].decode("utf-8", "replace"); pos += 5 + n
        elif sig == "u":
            pos += (-pos) % 4
            out[code], = struct.unpack_from(e + "I", raw, pos); pos += 4
        elif sig == "g":
            n = raw[pos]; out[code] = raw[pos + 1:pos + 1 + n].decode(); pos += 2 + n
        else:
            break
    body = 16 + flen + ((-(16 + flen)) % 8)
    if out.get(8, "").startswith("s") and len(raw) >= body + 4:
        n, = struct.unpack_from(e + "I", raw, body)
        out["body_string"] = raw[body + 4:body + 4 + n].decode("utf-8", "replace")
    if out.get(8, "") == "as" and len(raw) >= body + 4:
        n, = struct.unpack_from(e + "I", raw, body)
        pos, names = body + 4, []
        while pos < body + 4 + n:
            pos += (-pos) % 4
            k, = struct.unpack_from(e + "I", raw, pos)
            names.append(raw[pos + 4:pos + 4 + k].decode("utf-8", "replace"))
            pos += 5 + k
        out["names"] = names
    return out

def describe(m):
    if m is None:
        return "noreply"
    if m["type"] == ERROR:
        return "error:" + m.get(4, "")
    return "return"
"""#

/// Hostile messages to batond, one connection per case; prints `case=result`.
let busAttackHostile = #"""
# Hostile messages to batond, sent as the account running this (nobody). argv: bus address.
# Prints one line per case: "case=result" (return, error:NAME, noreply, closed).
import os, sys, struct, xml.etree.ElementTree as ET
from rawbus import *

address = sys.argv[1]
D, M = "org.baton", "/org/baton"

def attempt(name, build, fds=(), timeout=20):
    try:
        bus = Bus(address)
    except Exception as error:
        print("%s=connect-failed:%r" % (name, error), flush=True)
        return
    serial = bus.next_serial()
    try:
        bus.send(build(bus, serial), fds)
        print("%s=%s" % (name, describe(bus.wait_reply(serial, timeout))), flush=True)
    except (EOFError, ConnectionResetError, BrokenPipeError):
        print("%s=closed" % name, flush=True)
    finally:
        bus.sock.close()

def status_fields(extra=()):
    return [(1, "o", M), (2, "s", "org.baton.Manager1"), (3, "s", "GetStatus"), (6, "s", D)] + list(extra)

def status(extra=(), **kw):
    return lambda bus, s: message(CALL, s, status_fields(extra), **kw)

def create(user_info, extra=(), **kw):
    return lambda bus, s: call(s, D, M, "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                               ["org.example.Attack", "attack", user_info, []], **kw) if not extra else \
        message(CALL, s, [(1, "o", M), (2, "s", "org.baton.Manager1"), (3, "s", "CreateActivity"), (6, "s", D)] + list(extra),
                "ssa{sv}a{sv}", ["org.example.Attack", "attack", user_info, []], **kw)

devnull = os.open("/dev/null", os.O_RDONLY)

# Header fields D-Bus does not define, of odd types (dbus-daemon strips them, dbus-broker forwards them).
attempt("unknown field h", status([(0x42, "h", 5)]))
attempt("unknown field a{ss} with a repeated key", status([(0x43, "a{ss}", [("k", "v"), ("k", "v")])]))
attempt("unknown field v in v in v", status([(0x44, "v", ("v", ("v", ("u", 7))))]))
attempt("unknown field a(yv)", status([(0x45, "a(yv)", [(1, ("s", "x"))])]))
attempt("unknown field s with invalid UTF-8", status([(0x46, "s", b"\xff\xfe")]))
attempt("unknown field (ux)", status([(0xff, "(ux)", (1, 2))]))
# Header fields D-Bus defines, repeated or wrong.
attempt("member twice", status([(3, "s", "Nope")]))
attempt("path twice", status([(1, "o", "/org/baton/ring")]))
attempt("member of the wrong type", lambda bus, s: message(CALL, s, [(1, "o", M), (2, "s", "org.baton.Manager1"), (3, "u", 7), (6, "s", D)]))
attempt("no member", lambda bus, s: message(CALL, s, [(1, "o", M), (2, "s", "org.baton.Manager1"), (6, "s", D)]))
attempt("body shorter than its signature", status([(8, "g", "s")], raw_body=b"\x10\0\0\0ab"))
# Descriptors.
attempt("UNIX_FDS 1 without a descriptor", status([(9, "u", 1)]))
attempt("a descriptor without UNIX_FDS", status(), fds=[devnull])
attempt("UNIX_FDS 2 with one descriptor", status([(9, "u", 2)], body_sig="h", body=[0]), fds=[devnull])
attempt("a descriptor in a variant in userInfo", create([("f", ("h", 0))], extra=[(9, "u", 1)]), fds=[devnull])
attempt("a descriptor in a variant to GetStatus", status([(9, "u", 1)], body_sig="v", body=[("h", 0)]), fds=[devnull])
# Many descriptors in variants on one connection: batond must close each (the test counts its descriptors).
def many_descriptors():
    bus = Bus(address)
    answers = {}
    for _ in range(64):
        s = bus.next_serial()
        bus.send(message(CALL, s, [(1, "o", M), (2, "s", "org.baton.Manager1"), (3, "s", "CreateActivity"), (6, "s", D), (9, "u", 4)],
                         "ssa{sv}a{sv}", ["org.example.Attack", "attack", [("a", ("h", 0)), ("b", ("ah", [1, 2, 3]))], []]),
                 [devnull] * 4)
        result = describe(bus.wait_reply(s, 20))
        answers[result] = answers.get(result, 0) + 1
    bus.sock.close()
    print("64 calls with 4 descriptors each=%s" % ",".join("%s:%d" % kv for kv in sorted(answers.items())), flush=True)
many_descriptors()
# Nesting and size.
def nested(depth):
    value = ("s", "deep")
    for _ in range(depth):
        value = ("av", [value])
    return value
attempt("userInfo nested 30 arrays through variants", create([("d", nested(30))]))
attempt("a variant nested 40 deep to GetStatus", status(body_sig="v", body=[nested(31)]))
attempt("userInfo of 1 MiB", create([("big", ("ay", b"\0" * (1 << 20)))]))
attempt("100,000 strings to GetStatus", status(body_sig="as", body=[["x"] * 100000]))
attempt("a message of 9 MiB", create([("big", ("ay", b"\0" * (9 << 20)))]), timeout=60)
attempt("invalid UTF-8 in an argument", lambda bus, s: call(s, D, M, "org.baton.Manager1", "CreateActivity", "ssa{sv}a{sv}",
                                                            [b"org.example.\xff\xfe", "x", [], []]))
attempt("a dictionary with a repeated key in userInfo", create([("k", ("s", "a")), ("k", ("s", "b"))]))

# Unicast signals pretending to come from the bus and from BlueZ, then a Ping: batond read them.
def signal(path, interface, member, sig, body):
    return lambda bus, s: (message(SIGNAL, s, [(1, "o", path), (2, "s", interface), (3, "s", member), (6, "s", D)], sig, body)
                           + call(s + 1, D, M, "org.freedesktop.DBus.Introspectable", "Introspect"))
def signal_then_ping(name, path, interface, member, sig, body):
    try:
        bus = Bus(address)
        s = bus.next_serial(); bus.next_serial()
        bus.send(signal(path, interface, member, sig, body)(bus, s))
        print("%s=%s" % (name, describe(bus.wait_reply(s + 1, 20))), flush=True)
        bus.sock.close()
    except (EOFError, ConnectionResetError, BrokenPipeError):
        print("%s=closed" % name, flush=True)

def list_names():
    bus = Bus(address)
    s = bus.next_serial()
    bus.send(call(s, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames"))
    reply = bus.wait_reply(s, 20)
    bus.sock.close()
    return reply
names_reply = list_names()
names = names_reply.get("names", []) if names_reply else []
for name in ["org.baton"] + names:
    signal_then_ping("NameOwnerChanged from a user: %s gone" % ("org.baton" if name == "org.baton" else "a name"),
                     "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged", "sss", [name, ":1.1", ""])
signal_then_ping("NameLost from a user", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameLost", "s", ["org.baton"])
signal_then_ping("InterfacesAdded as BlueZ", "/", "org.freedesktop.DBus.ObjectManager", "InterfacesAdded", "oa{sa{sv}}",
                 ["/org/bluez/hci0", [("org.bluez.Adapter1", [("Powered", ("b", True)), ("Address", ("s", "00:11:22:33:44:55"))])]])
signal_then_ping("PropertiesChanged as BlueZ", "/org/bluez/hci0", "org.freedesktop.DBus.Properties", "PropertiesChanged", "sa{sv}as",
                 ["org.bluez.Adapter1", [("Powered", ("b", False))], []])
signal_then_ping("Released as BlueZ", "/org/baton/advertisement0", "org.bluez.LEAdvertisement1", "Release", "", [])

# Replies nobody asked for (a forged polkit answer with every serial batond may have used).
def forged_replies():
    bus = Bus(address)
    s = bus.next_serial()
    bus.send(call(s, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner", "s", ["org.baton"]))
    owner = bus.wait_reply(s, 20)["body_string"]
    for serial in range(1, 3001):
        bus.send(message(RETURN, bus.next_serial(), [(5, "u", serial), (6, "s", owner)], "(bba{ss})", [(True, False, [])]))
    s = bus.next_serial()
    bus.send(call(s, D, M, "org.freedesktop.DBus.Introspectable", "Introspect"))
    print("3,000 forged replies then Ping=%s" % describe(bus.wait_reply(s, 30)), flush=True)
    bus.sock.close()
try:
    forged_replies()
except (EOFError, ConnectionResetError, BrokenPipeError):
    print("3,000 forged replies then Ping=closed", flush=True)

# Every method batond exports, called with a wrong signature.
def introspect(bus, path):
    s = bus.next_serial()
    bus.send(call(s, D, path, "org.freedesktop.DBus.Introspectable", "Introspect"))
    reply = bus.wait_reply(s, 20)
    return reply.get("body_string", "") if reply else ""
bus = Bus(address)
pending = ["/"]
seen = set()
while pending:
    path = pending.pop()
    if path in seen:
        continue
    seen.add(path)
    root = ET.fromstring(introspect(bus, path))
    for node in root.findall("node"):
        pending.append(path.rstrip("/") + "/" + node.get("name"))
    for interface in root.findall("interface"):
        for method in interface.findall("method"):
            insig = "".join(a.get("type") for a in method.findall("arg") if a.get("direction", "in") == "in")
            wrong_sig, wrong = ("s", ["wrong"]) if insig == "u" else ("u", [7])
            s = bus.next_serial()
            bus.send(call(s, D, path, interface.get("name"), method.get("name"), wrong_sig, wrong))
            print("wrong signature %s %s.%s=%s" % (path, interface.get("name"), method.get("name"), describe(bus.wait_reply(s, 20))), flush=True)
bus.sock.close()
print("done=", flush=True)
"""#

/// Pipelined Pairing1.Remove calls from many connections; prints the tally of answers.
let busAttackFlood = #"""
# Many connections, each with many Pairing1.Remove calls in flight (each makes batond ask polkit).
# argv: address, connections, calls per connection. Prints "sent", then the answers' tally.
import sys, time, select
from rawbus import *
address, connections, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
buses = []
for _ in range(connections):
    bus = Bus(address)
    serials = []
    for _ in range(per):
        s = bus.next_serial()
        bus.send(call(s, "org.baton", "/org/baton/ring", "org.baton.Pairing1", "Remove", "s", ["no-such-member"]))
        serials.append(s)
    buses.append((bus, set(serials)))
print("sent", flush=True)
tally = {}
deadline = time.monotonic() + 120
for bus, serials in buses:
    while serials and time.monotonic() < deadline:
        try:
            m = bus.read_message(deadline - time.monotonic())
        except EOFError:
            tally["closed"] = tally.get("closed", 0) + len(serials)
            break
        if m is None:
            break
        if m["type"] in (RETURN, ERROR) and m.get(5) in serials:
            serials.discard(m[5])
            key = describe(m)
            tally[key] = tally.get(key, 0) + 1
    if serials:
        tally["noreply"] = tally.get("noreply", 0) + len(serials)
for key, count in sorted(tally.items()):
    print("%s=%d" % (key, count), flush=True)
"""#

/// Well-formed calls given as JSON; prints `row=name|message` and each call's time.
let busAttackCalls = #"""
# Calls as the account running this. argv: address, then JSON [[row, path, interface, method, signature, [args]], ...].
# Prints "row=ok|REPLY" or "row=ERRORNAME|message", and "elapsed row=seconds".
import sys, json, time
import dbus
bus = dbus.bus.BusConnection(sys.argv[1])
print("name=%s" % bus.get_unique_name(), flush=True)
for row, path, interface, method, signature, args in json.loads(sys.argv[2]):
    start = time.monotonic()
    try:
        reply = bus.call_blocking("org.baton", path, interface, method, signature, args, timeout=90)
        print("%s=ok|%s" % (row, json.dumps(reply, default=str)), flush=True)
    except dbus.exceptions.DBusException as error:
        print("%s=%s|%s" % (row, error.get_dbus_name(), error.get_dbus_message()), flush=True)
    print("elapsed %s=%.2f" % (row, time.monotonic() - start), flush=True)
"""#

/// RequestName of each name with flags 0, QUEUE and REPLACE_EXISTING.
let busAttackNames = #"""
# RequestName as the account running this. argv: address, names... Prints "name/flags=result".
import sys
import dbus
bus = dbus.bus.BusConnection(sys.argv[1])
for name in sys.argv[2:]:
    for flags in (0, 4, 2):
        try:
            result = bus.request_name(name, flags)
            print("%s/%d=granted %d" % (name, flags, result), flush=True)
        except dbus.exceptions.DBusException as error:
            print("%s/%d=%s" % (name, flags, error.get_dbus_name()), flush=True)
"""#
