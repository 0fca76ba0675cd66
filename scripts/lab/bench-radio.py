#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Radio path benchmark, run inside the lab by scripts/lab/bench (needs 6 controllers).

hci0: batond "alpha" (publishes), hci1: batond "beta" (suggests), hci2: the observer's scan,
hci3: the bare BlueZ advertiser, hci3-5: foreign adverts for the CPU phase.
All times are taken in this one process on one monotonic clock.
"""
import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

BATON_COMPANY = 0xFFFF
BARE_COMPANY = 0x0BA7
ACTIVITY_TYPE = "org.example.Reader.reading"
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


class Observer:
    """Every Device1 report bluetoothd signals, with its arrival time."""

    def __init__(self, system):
        self.heard = []  # (time, adapter, company, bytes)
        self.counts = {}  # adapter -> number of device signals carrying advert data
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
        if adapter == "hci2" and data is not None:
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


class Handler(dbus.service.Object):
    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ss", out_signature="b")
    def WillContinue(self, activity_type, device):
        return False

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ssa{sv}a{sv}", out_signature="")
    def Continue(self, activity_type, title, user_info, info):
        pass

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="sss", out_signature="")
    def FailedToContinue(self, activity_type, error, message):
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


def process_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid):
    """Voluntary and involuntary context switches over all live threads."""
    voluntary = involuntary = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches"):
                        voluntary += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        involuntary += int(line.split()[1])
        except FileNotFoundError:
            pass
    return voluntary, involuntary


def pid_of(name):
    out = subprocess.run(["pidof", name], capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--idle", type=float, default=60, help="seconds of idle wakeup counting")
    parser.add_argument("--idle-cpu", type=float, default=30, help="seconds of idle CPU measurement (before the wakeups)")
    parser.add_argument("--churn", type=float, default=20, help="seconds of foreign advert churn")
    parser.add_argument("--churn-interval", type=int, default=20, help="ms between new data on each foreign controller")
    args = parser.parse_args()

    DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="baton-bench.")
    address = f"unix:path={work}/bus"
    with open(f"{work}/bus.conf", "w") as conf:
        conf.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>{address}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>""")
    processes = []

    def spawn(arguments, **options):
        process = subprocess.Popen(arguments, **options)
        processes.append(process)
        return process

    def cleanup():
        for process in processes:
            if process.poll() is None:
                process.kill()

    try:
        spawn(["dbus-daemon", f"--config-file={work}/bus.conf", "--nofork"])
        for _ in range(100):
            if os.path.exists(f"{work}/bus"):
                break
            time.sleep(0.05)
        log("batond and bt-pair from", BIN)
        daemons = {}
        for name, adapter in (("alpha", "hci0"), ("beta", "hci1")):
            daemons[name] = spawn([f"{BIN}/batond", "--bus-address", address, "--bus-name", f"org.baton.{name}",
                                   "--state-dir", f"{work}/{name}", "--adapter", adapter, "--listen", "127.0.0.1",
                                   "--name", name], stderr=open(f"{work}/{name}.log", "w"))

        def cli(tool, name, *arguments, **options):
            return subprocess.run([f"{BIN}/{tool}", "--bus", address, "--bus-name", f"org.baton.{name}", *arguments],
                                  capture_output=True, text=True, **options)

        for _ in range(100):
            if cli("bt-pair", "alpha", "list").returncode == 0 and cli("bt-pair", "beta", "list").returncode == 0:
                break
            time.sleep(0.2)
        accept = subprocess.Popen([f"{BIN}/bt-pair", "--bus", address, "--bus-name", "org.baton.alpha", "--json", "accept",
                                   "--host", "127.0.0.1", "--test-auto-confirm"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        offer = json.loads(accept.stdout.readline())
        # The initiator's user types the code the acceptor shows ("Code: NNNNNN" on its stderr); the
        # acceptor's user then types the second code the initiator shows ("Second code: NNNNNN").
        initiator = subprocess.Popen([f"{BIN}/bt-pair", "--bus", address, "--bus-name", "org.baton.beta", "--json", "with",
                                      f"127.0.0.1:{offer['Port']}", "--session", offer["SessionId"], "--test-auto-confirm"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in accept.stderr:
            if line.startswith("Code: "):
                initiator.stdin.write(line.split()[1] + "\n")
                initiator.stdin.flush()
                break
        for line in initiator.stderr:
            if "Second code: " in line:  # after the prompt, on its line: no newline was typed there
                accept.stdin.write(line.split("Second code: ")[1].split()[0] + "\n")
                accept.stdin.flush()
                break
        _, initiator_errors = initiator.communicate(timeout=60)
        accept.wait()
        if initiator.returncode != 0:
            log("pairing failed:", initiator_errors)
            return 1
        log("paired")

        system = dbus.SystemBus()
        baton = dbus.bus.BusConnection(address)
        observer = Observer(system)
        suggestions = []  # (time, path)

        def interfaces_added(path, interfaces):
            if "org.baton.Suggestion1" in interfaces:
                suggestions.append((time.monotonic(), str(path)))

        baton.add_signal_receiver(interfaces_added, signal_name="InterfacesAdded",
                                  dbus_interface="org.freedesktop.DBus.ObjectManager", bus_name="org.baton.beta",
                                  path="/org/baton")
        Handler(baton, "/bench/handler")
        beta_manager = dbus.Interface(baton.get_object("org.baton.beta", "/org/baton"), "org.baton.Manager1")
        beta_manager.RegisterHandler(dbus.ObjectPath("/bench/handler"), dbus.Array([ACTIVITY_TYPE], signature="s"))
        alpha_manager = dbus.Interface(baton.get_object("org.baton.alpha", "/org/baton"), "org.baton.Manager1")

        scan = dbus.Interface(system.get_object("org.bluez", "/org/bluez/hci2"), "org.bluez.Adapter1")
        scan.SetDiscoveryFilter({"Transport": "le", "DuplicateData": True})
        scan.StartDiscovery()
        bare_manager = dbus.Interface(system.get_object("org.bluez", "/org/bluez/hci3"), "org.bluez.LEAdvertisingManager1")
        iterate_until(lambda: False, 2)

        def radio_state(adapter):
            properties = dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.freedesktop.DBus.Properties")
            return "discovering" if properties.Get("org.bluez.Adapter1", "Discovering") else "not discovering"

        log("before the rounds: alpha's hci0", radio_state("hci0"), "beta's hci1", radio_state("hci1"))
        results = {"bare": [], "publish": [], "create": [], "suggest": [], "published_reply": []}
        misses = {"bare": 0, "publish": 0, "suggest": 0}
        previous_activity = None

        def bare_round(index):
            data = [random.randrange(256) for _ in range(24)]
            path = f"/bench/advert{index}"
            advert = Advert(system, path, BARE_COMPANY, data)
            start = len(observer.heard)
            began = time.monotonic()
            call = call_async(bare_manager.RegisterAdvertisement, dbus.ObjectPath(path), dbus.Dictionary({}, signature="sv"))
            match = lambda: next((entry for entry in observer.heard[start:]
                                  if entry[2] == BARE_COMPANY and entry[3] == bytes(data)), None)
            if iterate_until(lambda: match() is not None, 5):
                results["bare"].append((match()[0] - began) * 1000)
            else:
                misses["bare"] += 1
            iterate_until(lambda: "time" in call, 5)
            done = call_async(bare_manager.UnregisterAdvertisement, dbus.ObjectPath(path))
            iterate_until(lambda: "time" in done, 5)
            advert.remove_from_connection()

        def publish_round(index):
            nonlocal previous_activity
            known = {entry[3] for entry in observer.heard if entry[2] == BATON_COMPANY}
            start, suggestion_start = len(observer.heard), len(suggestions)
            created = time.monotonic()
            path = alpha_manager.CreateActivity(ACTIVITY_TYPE, f"Chapter {index}",
                                                dbus.Dictionary({"page": dbus.Int64(index)}, signature="sv"),
                                                dbus.Dictionary({}, signature="sv"))
            activity = dbus.Interface(baton.get_object("org.baton.alpha", path), "org.baton.Activity1")
            became = time.monotonic()
            call = call_async(activity.BecomeCurrent)
            match = lambda: next((entry for entry in observer.heard[start:]
                                  if entry[2] == BATON_COMPANY and entry[3] not in known), None)
            if iterate_until(lambda: match() is not None, 5):
                heard = match()[0]
                results["publish"].append((heard - became) * 1000)
                results["create"].append((heard - created) * 1000)
                if iterate_until(lambda: len(suggestions) > suggestion_start, 5):
                    results["suggest"].append((suggestions[suggestion_start][0] - heard) * 1000)
                else:
                    misses["suggest"] += 1
            else:
                misses["publish"] += 1
                misses["suggest"] += 1
            iterate_until(lambda: "time" in call, 5)
            if "time" in call:
                results["published_reply"].append((call["time"] - became) * 1000)
            if previous_activity is not None:
                try:
                    previous_activity.Invalidate()
                except dbus.exceptions.DBusException:
                    pass
            previous_activity = activity
            iterate_until(lambda: False, 0.3)

        for index in range(args.rounds):
            if index % 2 == 0:
                bare_round(index)
                publish_round(index)
            else:
                publish_round(index)
                bare_round(index)
            iterate_until(lambda: False, 0.2)

        def summary(values):
            return {"n": len(values), "p50": round(percentile(values, 0.5), 1), "p95": round(percentile(values, 0.95), 1),
                    "min": round(min(values), 1) if values else None, "max": round(max(values), 1) if values else None}

        figures = {key: summary(values) for key, values in results.items()}
        bare50 = figures["bare"]["p50"]
        report = {"rounds": args.rounds, "misses": misses, "latency_ms": figures,
                  "ratio_publish": round(figures["publish"]["p50"] / bare50, 2),
                  "ratio_create": round(figures["create"]["p50"] / bare50, 2),
                  "ratio_suggest": round((bare50 + figures["suggest"]["p50"]) / bare50, 2)}
        print("LAB BENCH radio-path", json.dumps(report), flush=True)
        print(f"bare    register -> heard        p50 {figures['bare']['p50']:7.1f} ms  p95 {figures['bare']['p95']:7.1f} ms")
        print(f"publish BecomeCurrent -> heard   p50 {figures['publish']['p50']:7.1f} ms  p95 {figures['publish']['p95']:7.1f} ms"
              f"  ratio {report['ratio_publish']}")
        print(f"publish CreateActivity -> heard  p50 {figures['create']['p50']:7.1f} ms  p95 {figures['create']['p95']:7.1f} ms"
              f"  ratio {report['ratio_create']}")
        print(f"suggest heard -> Suggestion1     p50 {figures['suggest']['p50']:7.1f} ms  p95 {figures['suggest']['p95']:7.1f} ms"
              f"  ratio (bare + this) / bare {report['ratio_suggest']}")
        print(f"misses {misses}", flush=True)

        log("after the rounds: alpha's hci0", radio_state("hci0"), "beta's hci1", radio_state("hci1"))
        # Radio notices and failed registrations seen so far.
        notices = dbus.Interface(baton.get_object("org.baton.alpha", "/org/baton/ring"), "org.baton.Ring1").GetRadioNotices()
        print("alpha radio notices:", len(notices), "distinct:", len(set(str(n) for n in notices)), flush=True)
        for text in sorted(set(str(n) for n in notices)):
            print("   ", text)

        # Idle first (after the churn bluetoothd expires a thousand devices for minutes): only
        # beta runs, scanning, with its own advert on the air and nothing else. Wakeups are the
        # blocking system calls (poll, epoll, futex, sleeps) that returned, over all threads,
        # counted by strace -f -c; CPU from /proc.
        scan.StopDiscovery()
        daemons["alpha"].terminate()
        daemons["alpha"].wait()
        beta, bluetoothd = daemons["beta"].pid, pid_of("bluetoothd")
        iterate_until(lambda: False, 5)

        blocking = "poll,ppoll,epoll_wait,epoll_pwait,select,pselect6,futex,nanosleep,clock_nanosleep"
        trace_dir = os.environ.get("BATON_BENCH_TRACE")

        def wakeups(pid, seconds):
            if trace_dir:
                # Diagnostic: every call with its time and thread, plus what the reads brought.
                trace = subprocess.Popen(["strace", "-f", "-tt", "-q", "-s", "256", "-o", f"{trace_dir}/strace-{pid}.txt",
                                          "-p", str(pid), "-e", f"trace={blocking},read,recvmsg,recvfrom,write,sendmsg,timerfd_settime"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                return trace
            trace = subprocess.Popen(["strace", "-f", "-c", "-q", "-p", str(pid), "-e", f"trace={blocking}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            return trace

        # CPU without strace (tracing costs the traced process), then the wakeups with it.
        before = (process_cpu_seconds(beta), process_cpu_seconds(bluetoothd))
        reports_before = observer.counts.get("hci1", 0)
        iterate_until(lambda: False, args.idle_cpu)
        after = (process_cpu_seconds(beta), process_cpu_seconds(bluetoothd))
        monitors = []
        if trace_dir:
            monitors = [subprocess.Popen(["dbus-monitor", *bus, "--profile"], stdout=open(f"{trace_dir}/monitor-{name}.txt", "w"),
                                         stderr=subprocess.STDOUT)
                        for name, bus in (("system", ["--system"]), ("private", ["--address", address]))]
            log("tracing the idle window into", trace_dir, "beta", beta, "bluetoothd", bluetoothd)
        traces = {"batond": wakeups(beta, args.idle), "bluetoothd": wakeups(bluetoothd, args.idle)}
        iterate_until(lambda: False, args.idle)
        for monitor in monitors:
            monitor.terminate()
        calls = {}
        for name, trace in traces.items():
            trace.send_signal(signal.SIGINT)
            table = trace.communicate()[1]
            # Rows: % time, seconds, usecs/call, calls, [errors,] syscall; the last row is the total.
            rows = [line.split() for line in table.splitlines()]
            calls[name] = {row[-1]: int(row[3]) for row in rows
                           if len(row) >= 5 and row[3].isdigit() and row[-1] != "total"}
        if trace_dir:
            for name, pid in (("batond", beta), ("bluetoothd", bluetoothd)):
                counted = {}
                with open(f"{trace_dir}/strace-{pid}.txt") as lines:
                    for line in lines:
                        parts = line.split()
                        if len(parts) < 3 or "resumed>" in line:
                            continue
                        call = parts[2].split("(")[0]
                        if call in blocking.split(","):
                            counted[call] = counted.get(call, 0) + 1
                calls[name] = counted
            subprocess.run(["cp", f"{work}/beta.log", f"{trace_dir}/beta.log"])
        with open(f"/proc/{beta}/status") as status:
            rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        idle = {"batond_rss_kib": rss_kib, "seconds": args.idle, "cpu_seconds": args.idle_cpu, "reports_on_hci1": observer.counts.get("hci1", 0) - reports_before,
                "batond_cpu_ms": round((after[0] - before[0]) * 1000), "bluetoothd_cpu_ms": round((after[1] - before[1]) * 1000),
                "batond_wakeups": sum(calls["batond"].values()), "bluetoothd_wakeups": sum(calls["bluetoothd"].values()),
                "batond_calls": calls["batond"], "bluetoothd_calls": calls["bluetoothd"]}
        print("LAB BENCH radio-idle", json.dumps(idle), flush=True)

        # CPU per heard foreign report: only beta scans.
        foreign = []
        for adapter in ("hci3", "hci4", "hci5"):
            manager = dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.bluez.LEAdvertisingManager1")
            for instance in range(int(dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"),
                                                     "org.freedesktop.DBus.Properties").Get("org.bluez.LEAdvertisingManager1",
                                                                                             "SupportedInstances"))):
                path = f"/bench/foreign/{adapter}/{instance}"
                advert = Advert(system, path, BARE_COMPANY, [random.randrange(256) for _ in range(24)])
                # Asynchronous: bluetoothd reads the advert object back before it answers.
                call = call_async(manager.RegisterAdvertisement, dbus.ObjectPath(path), dbus.Dictionary({}, signature="sv"))
                iterate_until(lambda: "time" in call, 10)
                if "reply" not in call:
                    advert.remove_from_connection()
                    log("foreign advert refused:", call.get("error"))
                    break
                foreign.append((manager, advert, path))
        # Churn: the foreign adverts above turn advertising on; then new addresses and data go
        # straight to those controllers over raw HCI sockets, past the kernel's mgmt and
        # bluetoothd, so neither daemon pays for making the reports, only for hearing them.
        raw = []
        for index in (3, 4, 5):
            sock = socket.socket(socket.AF_BLUETOOTH, socket.SOCK_RAW, socket.BTPROTO_HCI)
            sock.bind((index,))
            raw.append(sock)

        def command(sock, opcode, parameters):
            sock.send(bytes([0x01, opcode & 0xFF, opcode >> 8, len(parameters)]) + parameters)

        def churn():
            # A new static random address each time (the scanner's duplicate filter is per
            # address), then new data: a new foreign advertiser as far as the scanner can tell.
            for sock in raw:
                address = bytearray(os.urandom(6))
                address[5] |= 0xC0
                payload = bytes([27, 0xFF, BARE_COMPANY & 0xFF, BARE_COMPANY >> 8]) + os.urandom(24)
                command(sock, 0x200A, bytes([0]))                     # LE Set Advertising Enable: off
                command(sock, 0x2005, bytes(address))                 # LE Set Random Address
                command(sock, 0x2008, bytes([len(payload)]) + payload + bytes(31 - len(payload)))  # data
                command(sock, 0x200A, bytes([1]))                     # on
            return True

        churn_source = GLib.timeout_add(args.churn_interval, churn)
        reports_before = observer.counts.get("hci1", 0)
        cpu_before = (process_cpu_seconds(beta), process_cpu_seconds(bluetoothd))
        iterate_until(lambda: False, args.churn)
        cpu_after = (process_cpu_seconds(beta), process_cpu_seconds(bluetoothd))
        GLib.source_remove(churn_source)
        for sock in raw:
            sock.close()
        reports = observer.counts.get("hci1", 0) - reports_before
        for manager, advert, path in foreign:
            call = call_async(manager.UnregisterAdvertisement, dbus.ObjectPath(path))
            iterate_until(lambda: "time" in call, 5)
            advert.remove_from_connection()
        per_thousand = lambda before, after: round((after - before) / max(1, reports) * 1000, 2)
        cpu = {"foreign_adverts": len(foreign), "seconds": args.churn, "reports_on_hci1": reports,
               "batond_cpu_s_per_1000": per_thousand(cpu_before[0], cpu_after[0]),
               "bluetoothd_cpu_s_per_1000": per_thousand(cpu_before[1], cpu_after[1])}
        print("LAB BENCH radio-cpu", json.dumps(cpu), flush=True)

        failures = subprocess.run(["grep", "-c", "Failed to add advertisement\\|Failed to register advertisement",
                                   f"{os.environ.get('LAB_RUN_DIR', '/run/lab')}/bluetoothd.log"], capture_output=True, text=True)
        print("bluetoothd advertisement failures logged:", failures.stdout.strip() or "0", flush=True)
        return 0
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
