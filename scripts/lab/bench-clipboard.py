#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Universal clipboard benchmark, run inside the lab by scripts/lab/bench-clipboard (4 controllers).

hci0: batond "alpha", hci1: batond "beta" (paired over TCP on 127.0.0.1); each has an Xvfb display and
a baton-agent with the clipboard on (root's account on both, each agent with its own runtime and
config directories and session bus). hci2: the observer's scan, hci3: the bare BlueZ advertiser.
Per round, interleaved:
  bare    register an advert on hci3 -> heard by the scan on hci2 (BlueZ alone)
  owned   `xclip -i` on alpha's display -> beta's agent owns CLIPBOARD on beta's display (XFixes)
  paste   `xclip -o` on beta's display -> its last byte read from xclip's output
  tcp     the same bytes over a fresh TCP connection 127.0.0.1 -> 127.0.0.1 (connect -> last byte)
for a 1 KiB text and a 10 MiB PNG, and for a copy of files: a 10 MiB file copied as a text/uri-list
(paste: `xclip -o -t text/uri-list` -> the list of beta's local copy in xclip, which the agent hands
over once the file's bytes are on beta; checked against the file; tcp: the file's bytes). All times
on this process's monotonic clock.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

import dbus
import dbus.lowlevel
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import BIN, BareBaseline, Lab, Observer, SelectionWatch, iterate_until, log, start_scan, summary, wait_for_path  # noqa: E402


class CallRecorder:
    """The clipboard's calls on the private bus, with their arrival times, through a monitor
    connection (Monitoring.BecomeMonitor, as dbus-monitor does): the agents' Clipboard1.Offer and
    Paste, batond's ClipboardAgent1.Offered, and the replies to Paste."""

    def __init__(self, address):
        self.calls = []  # (time, member, sender, destination)
        self.paste_serials = {}
        self.bus = dbus.bus.BusConnection(address)
        rules = ["type='method_call',interface='org.baton.Clipboard1'", "type='method_call',interface='org.baton.ClipboardAgent1'",
                 "type='method_return'", "type='error'"]
        self.bus.add_message_filter(self.filter)
        self.bus.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Monitoring", "BecomeMonitor",
                               "asu", (rules, 0))

    def filter(self, bus, message):
        now = time.monotonic()
        if isinstance(message, dbus.lowlevel.MethodCallMessage):
            if message.get_interface() in ("org.baton.Clipboard1", "org.baton.ClipboardAgent1"):
                self.calls.append((now, message.get_member(), message.get_sender(), message.get_destination()))
                if message.get_member() in ("Paste", "PasteFile"):
                    self.paste_serials[(message.get_sender(), message.get_serial())] = message.get_member()
        elif isinstance(message, (dbus.lowlevel.MethodReturnMessage, dbus.lowlevel.ErrorMessage)):
            asked = self.paste_serials.get((message.get_destination(), message.get_reply_serial()))
            if asked:
                self.calls.append((now, asked + " reply", message.get_sender(), message.get_destination()))
        # Handled: a monitor must never answer (libdbus would send UnknownMethod for a call left
        # unhandled, and the bus closes a monitor that sends).
        return dbus.lowlevel.HANDLER_RESULT_HANDLED

    def first(self, member, since):
        return next((when for when, name, _, _ in self.calls if name == member and when >= since), None)


def make_png(path, size):
    """A valid PNG of about `size` bytes (noise does not compress)."""
    side = int((size / 3) ** 0.5)
    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))

    def chunk(kind, data):
        return len(data).to_bytes(4, "big") + kind + data + (zlib.crc32(kind + data) & 0xFFFFFFFF).to_bytes(4, "big")

    header = side.to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b"")
    with open(path, "wb") as file:
        file.write(png)
    return png


class TCPSource:
    """Serves a file's bytes to every connection on 127.0.0.1 (another process, as batond is)."""

    def __init__(self, lab, path):
        self.process = lab.spawn([sys.executable, "-c", """
import socket, sys
data = open(sys.argv[1], "rb").read()
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(4)
print(server.getsockname()[1], flush=True)
while True:
    connection, _ = server.accept()
    connection.sendall(data)
    connection.close()
""", path], stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())

    def fetch(self):
        """(milliseconds from connect to the last byte, bytes)."""
        began = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.port)) as connection:
            parts = []
            while True:
                data = connection.recv(1 << 20)
                if not data:
                    break
                parts.append(data)
        return (time.monotonic() - began) * 1000, b"".join(parts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--text-bytes", type=int, default=1024)
    parser.add_argument("--image-bytes", type=int, default=10 << 20)
    parser.add_argument("--file-bytes", type=int, default=10 << 20)
    args = parser.parse_args()

    DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="baton-bench-clipboard.")
    lab = Lab(work)
    try:
        log("batond, bt-pair and baton-agent from", BIN)
        lab.start_batond("alpha", "hci0")
        lab.start_batond("beta", "hci1")
        if not lab.pair():
            return 1
        log("paired")
        machines = {}
        for index, name in enumerate(("alpha", "beta")):
            display = f":{31 + index}"
            lab.spawn(["Xvfb", display, "-screen", "0", "640x480x24", "-nolisten", "tcp"], stderr=subprocess.DEVNULL)
            wait_for_path(f"/tmp/.X11-unix/X{31 + index}", 60)
            home = f"{work}/home-{name}"
            os.makedirs(f"{home}/config/baton")
            os.makedirs(f"{home}/run", mode=0o700)
            os.makedirs(f"{home}/cache", mode=0o700)
            with open(f"{home}/config/baton/publishers.conf", "w") as conf:
                conf.write("clipboard = on\n")
            session = lab.start_bus(f"{home}/session-bus")
            environment = dict(os.environ, DISPLAY=display, XDG_RUNTIME_DIR=f"{home}/run", XDG_CONFIG_HOME=f"{home}/config",
                               XDG_CACHE_HOME=f"{home}/cache", DBUS_SESSION_BUS_ADDRESS=session)
            lab.spawn([f"{BIN}/baton-agent", "--bus", lab.address, "--bus-name", f"org.baton.{name}"], env=environment,
                      stderr=open(f"{work}/agent-{name}.log", "w"))
            machines[name] = {"display": display, "env": environment, "status": f"{home}/run/baton/clipboard-agent"}
        for name, machine in machines.items():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                if os.path.exists(machine["status"]) and "registered = yes" in open(machine["status"]).read():
                    break
                time.sleep(0.2)
            else:
                log(f"{name}'s agent did not register:", open(f"{work}/agent-{name}.log").read())
                return 1
        log("agents registered")
        watch = SelectionWatch(machines["beta"]["display"])
        copier = SelectionWatch(machines["alpha"]["display"])

        recorder = CallRecorder(lab.address)
        system = dbus.SystemBus()
        observer = Observer(system, "hci2")
        start_scan(system, "hci2")
        baseline = BareBaseline(system, observer, "hci3")
        iterate_until(lambda: False, 2)

        text_path, image_path = f"{work}/copy.txt", f"{work}/copy.png"
        with open(text_path, "wb") as file:
            file.write(b"".join(b"%07d " % index for index in range(args.text_bytes // 8 + 1))[:args.text_bytes])
        payloads = {"text": open(text_path, "rb").read(), "image": make_png(image_path, args.image_bytes)}
        # A copy of files: one file of noise, its uri-list copied; the paste's list names beta's local copy.
        shared_path, list_path = f"{work}/shared file.bin", f"{work}/copy.uri-list"
        with open(shared_path, "wb") as file:
            file.write(os.urandom(args.file_bytes))
        with open(list_path, "wb") as file:
            file.write(b"file://" + urllib.parse.quote(shared_path).encode() + b"\r\n")
        payloads["files"] = open(shared_path, "rb").read()
        kinds = ("text", "image", "files")
        files = {"text": text_path, "image": image_path, "files": list_path}
        targets = {"text": [], "image": ["-t", "image/png"], "files": ["-t", "text/uri-list"]}
        # The bus calls of a copy and a paste: (agent's offer, batond's hand-over, agent's paste).
        members = {"text": ("Offer", "Offered", "Paste"), "image": ("Offer", "Offered", "Paste"),
                   "files": ("OfferFiles", "OfferedFiles", "PasteFile")}
        sources = {kind: TCPSource(lab, shared_path if kind == "files" else path) for kind, path in files.items()}
        results = {f"{series}_{kind}": [] for series in ("owned", "paste", "tcp") for kind in kinds}
        results["bare"] = []
        # Where the time goes, per kind: stage -> milliseconds from the start of the copy or paste.
        stages = {kind: {stage: [] for stage in ("xclip", "offer", "heard", "offered", "owned", "asked", "pulled", "pasted")}
                  for kind in kinds}
        misses = {key: 0 for key in results}

        def since(began, when):
            return None if when is None else (when - began) * 1000

        def note(kind, stage, value):
            if value is not None:
                stages[kind][stage].append(value)

        def copy_round(kind):
            known = {entry[3] for entry in observer.heard if entry[2] == 0xFFFF}
            heard_from = len(observer.heard)
            began = time.monotonic()
            subprocess.run(["xclip", "-selection", "clipboard", *targets[kind], "-i", files[kind]], env=machines["alpha"]["env"], check=True)
            iterate_until(lambda: watch.owned_since(began, 0) is not None, 120)
            owned = watch.owned_since(began, 0)
            if owned is None:
                misses[f"owned_{kind}"] += 1
                return False
            results[f"owned_{kind}"].append((owned - began) * 1000)
            # The stages: xclip owns CLIPBOARD on alpha's display (its start), alpha's agent offers
            # (Clipboard1.Offer, after reading the copy), the new advert heard on hci2, beta's agent
            # handed the copy (ClipboardAgent1.Offered, after FetchClipboardOffer), beta owns it.
            note(kind, "xclip", since(began, copier.owned_since(began, 0)))
            offer = recorder.first(members[kind][0], began)
            heard = next((entry[0] for entry in observer.heard[heard_from:] if entry[2] == 0xFFFF and entry[3] not in known
                          and offer is not None and entry[0] >= offer), None)
            note(kind, "offer", since(began, offer))
            note(kind, "heard", since(began, heard))
            note(kind, "offered", since(began, recorder.first(members[kind][1], began)))
            note(kind, "owned", since(began, owned))
            return True

        def paste_round(kind):
            began = time.monotonic()
            paste = subprocess.Popen(["xclip", "-selection", "clipboard", "-o", *targets[kind]], env=machines["beta"]["env"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            received = bytearray()
            finished = []

            def read():  # in a thread, so that the main loop sees the bus calls as they come
                while True:
                    data = paste.stdout.read1(1 << 20)
                    if not data:
                        break
                    received.extend(data)
                finished.append(time.monotonic())
                GLib.idle_add(lambda: False)

            threading.Thread(target=read, daemon=True).start()
            iterate_until(lambda: bool(finished), 300)
            if not finished:
                paste.kill()
                misses[f"paste_{kind}"] += 1
                return
            ended = finished[0]
            paste.wait()
            paste_call = members[kind][2]
            iterate_until(lambda: recorder.first(paste_call + " reply", began) is not None, 5)
            note(kind, "asked", since(began, recorder.first(paste_call, began)))
            note(kind, "pulled", since(began, recorder.first(paste_call + " reply", began)))
            note(kind, "pasted", since(began, ended))
            if kind == "files":  # the list names beta's local copy: its bytes, read after the clock stopped
                line = bytes(received).split(b"\r\n")[0].decode(errors="replace")
                local = urllib.parse.unquote(line[len("file://"):]) if line.startswith("file:///") else ""
                received = open(local, "rb").read() if os.path.isfile(local) else b""
            if bytes(received) != payloads[kind]:
                misses[f"paste_{kind}"] += 1
                log(f"paste of {kind} returned {len(received)} of {len(payloads[kind])} bytes:", paste.stderr.read().decode(errors="replace"))
                return
            results[f"paste_{kind}"].append((ended - began) * 1000)

        def tcp_round(kind):
            elapsed, data = sources[kind].fetch()
            if data == payloads[kind]:
                results[f"tcp_{kind}"].append(elapsed)
            else:
                misses[f"tcp_{kind}"] += 1

        for index in range(args.rounds):
            heard = baseline.round(index)
            if heard is None:
                misses["bare"] += 1
            else:
                results["bare"].append(heard)
            for kind in kinds:
                if copy_round(kind):
                    # The owner alone is not the whole of it: the paste must find the copy taken.
                    iterate_until(lambda: False, 0.2)
                    if index % 2 == 0:
                        paste_round(kind)
                        tcp_round(kind)
                    else:
                        tcp_round(kind)
                        paste_round(kind)
            log(f"round {index + 1}/{args.rounds}")

        figures = {key: summary(values) for key, values in results.items()}

        def ratio(key, base):
            return round(figures[key]["p50"] / figures[base]["p50"], 2) if figures[base]["p50"] else None

        with open("/proc/loadavg") as load:
            guest_load = load.read().split()[:3]
        with open("/proc/cpuinfo") as cpuinfo:
            aes = " aes " in cpuinfo.read().replace("\n", " ")
        # What the guest's CPU does for the ring's TLS (the transfer's cipher work runs emulated here).
        speed = subprocess.run(["openssl", "speed", "-seconds", "1", "-bytes", "65536", "-evp", "aes-256-gcm"],
                               capture_output=True, text=True).stdout.strip().splitlines()
        log("guest CPU aes flag:", aes, "; openssl speed aes-256-gcm 64 KiB:", speed[-1] if speed else "not run")
        report = {"rounds": args.rounds, "text_bytes": len(payloads["text"]), "image_bytes": len(payloads["image"]),
                  "file_bytes": len(payloads["files"]), "misses": misses, "ratio_paste_files_to_tcp": ratio("paste_files", "tcp_files"),
                  "latency_ms": figures, "ratio_owned_text_to_bare": ratio("owned_text", "bare"),
                  "ratio_paste_text_to_tcp": ratio("paste_text", "tcp_text"), "ratio_paste_image_to_tcp": ratio("paste_image", "tcp_image"),
                  "guest_loadavg": guest_load, "guest_aes": aes, "guest_openssl_aes_256_gcm_64k": speed[-1] if speed else None}
        report["stages_p50_ms"] = {kind: {stage: summary(values)["p50"] for stage, values in table.items()} for kind, table in stages.items()}
        print("LAB BENCH clipboard", json.dumps(report), flush=True)
        rows = [("bare   register -> heard (BlueZ)", "bare"), ("owned  copy text -> beta owns it", "owned_text"),
                ("owned  copy image -> beta owns it", "owned_image"), ("paste  text -> in xclip", "paste_text"),
                ("tcp    text, raw", "tcp_text"), ("paste  image -> in xclip", "paste_image"), ("tcp    image, raw", "tcp_image"),
                ("owned  copy file -> beta owns it", "owned_files"), ("paste  file -> bytes on beta", "paste_files"), ("tcp    file, raw", "tcp_files")]
        for label, key in rows:
            print(f"{label:36} p50 {figures[key]['p50']:9.1f} ms  p95 {figures[key]['p95']:9.1f} ms  n {figures[key]['n']}")
        for kind in kinds:
            p50 = report["stages_p50_ms"][kind]
            print(f"  {kind}: copy -> xclip owns it on alpha {p50['xclip']} -> Offer {p50['offer']} -> advert heard {p50['heard']} -> Offered to beta's agent {p50['offered']}"
                  f" -> owned {p50['owned']}; paste -> Paste call {p50['asked']} -> Paste reply {p50['pulled']} -> in xclip {p50['pasted']} (ms, p50)")
        print(f"ratios (p50): owned text / bare {report['ratio_owned_text_to_bare']}, paste text / tcp {report['ratio_paste_text_to_tcp']}, "
              f"paste image / tcp {report['ratio_paste_image_to_tcp']}, paste file / tcp {report['ratio_paste_files_to_tcp']}; misses {misses}", flush=True)
        return 0 if not any(misses.values()) else 1
    finally:
        lab.cleanup()


if __name__ == "__main__":
    sys.exit(main())
