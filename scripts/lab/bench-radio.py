#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Radio path benchmark, run inside the lab by scripts/lab/bench (needs 6 controllers).

hci0: batond "alpha" (publishes), hci1: batond "beta" (suggests), hci2: the observer's scan,
hci3: the bare BlueZ advertiser, hci3-5: foreign adverts for the CPU phase.
All times are taken in this one process on one monotonic clock. The private bus, the pairing and the
bare BlueZ baseline are scripts/lab/benchlib.py's, shared with scripts/lab/bench-clipboard.py.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (BARE_COMPANY, BIN, Advert, BareBaseline, Lab, Observer, call_async, iterate_until, log,  # noqa: E402
                      start_scan, summary)

BATON_COMPANY = 0xFFFF
ACTIVITY_TYPE = "org.example.Reader.reading"


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
    lab = Lab(work)
    address = lab.address
    try:
        log("batond and bt-pair from", BIN)
        for name, adapter in (("alpha", "hci0"), ("beta", "hci1")):
            lab.start_batond(name, adapter)
        daemons = lab.daemons
        if not lab.pair():
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

        scan = start_scan(system, "hci2")
        baseline = BareBaseline(system, observer, "hci3")
        iterate_until(lambda: False, 2)

        def radio_state(adapter):
            properties = dbus.Interface(system.get_object("org.bluez", f"/org/bluez/{adapter}"), "org.freedesktop.DBus.Properties")
            return "discovering" if properties.Get("org.bluez.Adapter1", "Discovering") else "not discovering"

        log("before the rounds: alpha's hci0", radio_state("hci0"), "beta's hci1", radio_state("hci1"))
        results = {"bare": [], "publish": [], "create": [], "suggest": [], "published_reply": []}
        misses = {"bare": 0, "publish": 0, "suggest": 0}
        previous_activity = None

        def bare_round(index):
            heard = baseline.round(index)
            if heard is None:
                misses["bare"] += 1
            else:
                results["bare"].append(heard)

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
        lab.cleanup()


if __name__ == "__main__":
    sys.exit(main())
