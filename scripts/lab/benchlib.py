# SPDX-License-Identifier: GPL-2.0-or-later
"""Pieces the lab benchmarks share (scripts/lab/bench-radio.py, scripts/lab/bench-clipboard.py), run
inside the lab: a private bus, two paired batond, the bare BlueZ baseline (an advert registered on
one controller, heard by a scan on another), and the GLib main loop helpers. All times are taken in
the calling process on one monotonic clock.
"""
import ctypes
import json
import os
import random
import subprocess
import sys
import threading
import time

import dbus
import dbus.service
from gi.repository import GLib

BARE_COMPANY = 0x0BA7
REPO = os.getcwd()
BIN = os.environ.get("BATON_BENCH_BIN") or os.path.join(REPO, ".build/debug")


def log(*parts):
    print("bench:", *parts, file=sys.stderr, flush=True)


def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


def summary(values):
    return {"n": len(values), "p50": round(percentile(values, 0.5), 1), "p95": round(percentile(values, 0.95), 1),
            "min": round(min(values), 1) if values else None, "max": round(max(values), 1) if values else None}


class Observer:
    """Every Device1 report bluetoothd signals, with its arrival time (advert data heard on `scan_adapter`)."""

    def __init__(self, system, scan_adapter="hci2"):
        self.heard = []  # (time, adapter, company, bytes)
        self.counts = {}  # adapter -> number of device signals carrying advert data
        self.scan_adapter = scan_adapter
        system.add_signal_receiver(self.properties_changed, signal_name="PropertiesChanged",
                                   dbus_interface="org.freedesktop.DBus.Properties", bus_name="org.bluez",
                                   path_keyword="path", arg0="org.bluez.Device1", byte_arrays=True)
        system.add_signal_receiver(self.interfaces_added, signal_name="InterfacesAdded",
                                   dbus_interface="org.freedesktop.DBus.ObjectManager", bus_name="org.bluez",
                                   byte_arrays=True)

    def note(self, path, properties):
        now = time.monotonic()
        parts = str(path).split("/")
        if len(parts) < 5:
            return
        adapter = parts[3]
        if any(key in properties for key in ("ManufacturerData", "RSSI", "TxPower", "UUIDs", "Name")):
            self.counts[adapter] = self.counts.get(adapter, 0) + 1
        data = properties.get("ManufacturerData")
        if adapter == self.scan_adapter and data is not None:
            for company, value in data.items():
                self.heard.append((now, adapter, int(company), bytes(value)))

    def properties_changed(self, interface, changed, invalidated, path=None):
        self.note(path, changed)

    def interfaces_added(self, path, interfaces):
        if "org.bluez.Device1" in interfaces:
            self.note(path, interfaces["org.bluez.Device1"])


class Advert(dbus.service.Object):
    def __init__(self, bus, path, company, data):
        super().__init__(bus, path)
        self.company = company
        self.data = data

    @dbus.service.method("org.freedesktop.DBus.Properties", in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return {"Type": dbus.String("broadcast"),
                "ManufacturerData": dbus.Dictionary({dbus.UInt16(self.company): dbus.Array(self.data, signature="y")},
                                                    signature="qv"),
                "Includes": dbus.Array([], signature="s")}

    @dbus.service.method("org.bluez.LEAdvertisement1", in_signature="", out_signature="")
    def Release(self):
        pass


def iterate_until(predicate, timeout):
    """Runs the main loop (blocking, no polling) until predicate() is true; False on timeout."""
    context = GLib.MainContext.default()
    deadline = time.monotonic() + timeout
    fired = []
    source = GLib.timeout_add(int(timeout * 1000) + 1, lambda: fired.append(True) or False)
    try:
        while not predicate():
            if fired or time.monotonic() >= deadline:
                return False
            context.iteration(True)
        return True
    finally:
        if not fired:
            GLib.source_remove(source)


def call_async(method, *arguments):
    """Starts a D-Bus call; returns a dict that gets 'reply' or 'error' and 'time'."""
    result = {}

    def reply(*values):
        result["time"] = time.monotonic()
        result["reply"] = values

    def error(exception):
        result["time"] = time.monotonic()
        result["error"] = exception

    method(*arguments, reply_handler=reply, error_handler=error)
    return result


class Lab:
    """A private bus (eavesdropping allowed: a benchmark may watch calls) and the processes started
    for a benchmark, all killed by cleanup()."""

    def __init__(self, work):
        self.work = work
        self.address = f"unix:path={work}/bus"
        self.processes = []
        self.daemons = {}
        self.start_bus(f"{work}/bus")

    def start_bus(self, path):
        """A bus at `path` (no service activation; eavesdropping allowed); its address."""
        address = f"unix:path={path}"
        with open(f"{path}.conf", "w") as conf:
            conf.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>{address}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>""")
        self.spawn(["dbus-daemon", f"--config-file={path}.conf", "--nofork"])
        wait_for_path(path)
        return address

    def spawn(self, arguments, **options):
        process = subprocess.Popen(arguments, **options)
        self.processes.append(process)
        return process

    def cleanup(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.kill()

    def start_batond(self, name, adapter, *extra):
        self.daemons[name] = self.spawn([f"{BIN}/batond", "--bus-address", self.address, "--bus-name", f"org.baton.{name}",
                                         "--state-dir", f"{self.work}/{name}", "--adapter", adapter, "--listen", "127.0.0.1",
                                         "--name", name, *extra], stderr=open(f"{self.work}/{name}.log", "w"))
        return self.daemons[name]

    def cli(self, tool, name, *arguments, **options):
        return subprocess.run([f"{BIN}/{tool}", "--bus", self.address, "--bus-name", f"org.baton.{name}", *arguments],
                              capture_output=True, text=True, **options)

    def pair(self, acceptor="alpha", initiator="beta"):
        """Pairs two started daemons over TCP on 127.0.0.1, each side's user typing the other's code.
        True when both are paired."""
        for _ in range(100):
            if self.cli("bt-pair", acceptor, "list").returncode == 0 and self.cli("bt-pair", initiator, "list").returncode == 0:
                break
            time.sleep(0.2)
        accept = subprocess.Popen([f"{BIN}/bt-pair", "--bus", self.address, "--bus-name", f"org.baton.{acceptor}", "--json", "accept",
                                   "--host", "127.0.0.1", "--test-auto-confirm"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        offer = json.loads(accept.stdout.readline())
        # The initiator's user types the code the acceptor shows ("Code: NNNNNN" on its stderr); the
        # acceptor's user then types the second code the initiator shows ("Second code: NNNNNN").
        joining = subprocess.Popen([f"{BIN}/bt-pair", "--bus", self.address, "--bus-name", f"org.baton.{initiator}", "--json", "with",
                                    f"127.0.0.1:{offer['Port']}", "--session", offer["SessionId"], "--test-auto-confirm"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in accept.stderr:
            if line.startswith("Code: "):
                joining.stdin.write(line.split()[1] + "\n")
                joining.stdin.flush()
                break
        for line in joining.stderr:
            if "Second code: " in line:  # after the prompt, on its line: no newline was typed there
                accept.stdin.write(line.split("Second code: ")[1].split()[0] + "\n")
                accept.stdin.flush()
                break
        _, errors = joining.communicate(timeout=60)
        accept.wait()
        if joining.returncode != 0:
            log("pairing failed:", errors)
            return False
        return True


def wait_for_path(path, seconds=10):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


class BareBaseline:
    """The bare BlueZ path: a small client registers an LEAdvertisement1 on `adapter` with random data;
    the time until an observer's scan (Observer.scan_adapter) hears exactly that data."""

    def __init__(self, system, observer, adapter="hci3"):
        self.system = system
        self.observer = observer
        self.manager = dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.bluez.LEAdvertisingManager1")

    def round(self, index):
        """Milliseconds from RegisterAdvertisement to heard, or None when not heard within 5 s."""
        data = [random.randrange(256) for _ in range(24)]
        path = f"/bench/advert{index}"
        advert = Advert(self.system, path, BARE_COMPANY, data)
        start = len(self.observer.heard)
        began = time.monotonic()
        call = call_async(self.manager.RegisterAdvertisement, dbus.ObjectPath(path), dbus.Dictionary({}, signature="sv"))
        match = lambda: next((entry for entry in self.observer.heard[start:]
                              if entry[2] == BARE_COMPANY and entry[3] == bytes(data)), None)
        heard = None
        if iterate_until(lambda: match() is not None, 5):
            heard = (match()[0] - began) * 1000
        iterate_until(lambda: "time" in call, 5)
        done = call_async(self.manager.UnregisterAdvertisement, dbus.ObjectPath(path))
        iterate_until(lambda: "time" in done, 5)
        advert.remove_from_connection()
        return heard


def start_scan(system, adapter="hci2"):
    scan = dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.bluez.Adapter1")
    scan.SetDiscoveryFilter({"Transport": "le", "DuplicateData": True})
    scan.StartDiscovery()
    return scan


class SelectionWatch:
    """CLIPBOARD's owner changes on one X display, as XFixes reports them (libxcb through ctypes):
    (monotonic time, owner window) per change, the owner 0 when it was cleared."""

    def __init__(self, display):
        xcb = ctypes.CDLL("libxcb.so.1")
        xfixes = ctypes.CDLL("libxcb-xfixes.so.0")
        libc = ctypes.CDLL("libc.so.6")
        xcb.xcb_connect.restype = ctypes.c_void_p
        xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
        xcb.xcb_get_setup.restype = ctypes.c_void_p
        xcb.xcb_get_setup.argtypes = [ctypes.c_void_p]

        class ScreenIterator(ctypes.Structure):
            _fields_ = [("data", ctypes.POINTER(ctypes.c_uint32)), ("rem", ctypes.c_int), ("index", ctypes.c_int)]

        xcb.xcb_setup_roots_iterator.restype = ScreenIterator
        xcb.xcb_setup_roots_iterator.argtypes = [ctypes.c_void_p]
        xcb.xcb_intern_atom.restype = ctypes.c_uint
        xcb.xcb_intern_atom.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_char_p]
        xcb.xcb_intern_atom_reply.restype = ctypes.POINTER(ctypes.c_uint32)
        xcb.xcb_intern_atom_reply.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p]
        xcb.xcb_get_extension_data.restype = ctypes.POINTER(ctypes.c_uint8)
        xcb.xcb_get_extension_data.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        xcb.xcb_flush.argtypes = [ctypes.c_void_p]
        xcb.xcb_wait_for_event.restype = ctypes.POINTER(ctypes.c_uint8)
        xcb.xcb_wait_for_event.argtypes = [ctypes.c_void_p]
        xfixes.xcb_xfixes_query_version.restype = ctypes.c_uint
        xfixes.xcb_xfixes_query_version.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
        xfixes.xcb_xfixes_query_version_reply.restype = ctypes.c_void_p
        xfixes.xcb_xfixes_query_version_reply.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p]
        xfixes.xcb_xfixes_select_selection_input.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32]
        libc.free.argtypes = [ctypes.c_void_p]
        self.changes = []
        self.changed = threading.Condition()
        connection = xcb.xcb_connect(display.encode(), None)
        if not connection or xcb.xcb_connection_has_error(connection):
            raise RuntimeError(f"cannot connect to X display {display}")
        root = xcb.xcb_setup_roots_iterator(xcb.xcb_get_setup(connection)).data[0]
        name = b"CLIPBOARD"
        reply = xcb.xcb_intern_atom_reply(connection, xcb.xcb_intern_atom(connection, 0, len(name), name), None)
        clipboard = reply[2]  # response_type, pad, sequence (one uint32), length, atom
        libc.free(reply)
        version = xfixes.xcb_xfixes_query_version_reply(connection, xfixes.xcb_xfixes_query_version(connection, 5, 0), None)
        libc.free(version)
        extension = xcb.xcb_get_extension_data(connection, ctypes.addressof(ctypes.c_char.in_dll(xfixes, "xcb_xfixes_id")))
        first_event = extension[10]  # response_type, pad, sequence(2), length(4), present, major_opcode, first_event
        xfixes.xcb_xfixes_select_selection_input(connection, root, clipboard, 1)  # SET_SELECTION_OWNER
        xcb.xcb_flush(connection)

        def run():
            while True:
                event = xcb.xcb_wait_for_event(connection)
                if not event:
                    return
                now = time.monotonic()
                if event[0] & 0x7F == first_event:  # XFixesSelectionNotify: owner at bytes 8-11
                    owner = int.from_bytes(bytes(event[8:12]), "little")
                    with self.changed:
                        self.changes.append((now, owner))
                        self.changed.notify_all()
                    GLib.idle_add(lambda: False)  # wakes the main loop (iterate_until) to look
                libc.free(event)

        threading.Thread(target=run, daemon=True).start()

    def owned_since(self, start, timeout):
        """The first time after `start` at which someone took CLIPBOARD, waiting up to `timeout` s; None if nobody did."""
        def found():
            return next((when for when, owner in self.changes if when >= start and owner != 0), None)
        with self.changed:
            self.changed.wait_for(lambda: found() is not None, timeout)
            return found()
