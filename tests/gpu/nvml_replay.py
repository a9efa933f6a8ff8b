"""Record NVML answers on a GPU node, and replay them in tests.

A recording is JSON: ``system`` maps an NVML system call to its answer, ``devices`` holds one
map per GPU from call name to ``{args: answer}`` (args joined with commas, the device handle
left out). An answer is a JSON value, a struct as a dict, or ``{"nvml_error": NAME}``.
``events`` (optional) lists the XID events NVML raises, ``{"device": index, "xid": code}``, in
order; a recording without it answers the event calls NOT_SUPPORTED.

On a node with GPUs (nvidia-ml-py installed):
    python tests/gpu/nvml_replay.py record node.json
records every call the nvml_facts boundary and the GPU exporter make, in this format (no events:
those only come while one happens).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pynvml

MODULE_PATH = Path(__file__).resolve().parents[2] / "plugins" / "modules" / "nvml_facts.py"


def load_nvml_facts() -> ModuleType:
    """Import plugins/modules/nvml_facts.py as a plain module."""
    spec = importlib.util.spec_from_file_location("nvml_facts", MODULE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ERROR_NAMES = {
    value: name[len("NVML_ERROR_") :]
    for name, value in vars(pynvml).items()
    if name.startswith("NVML_ERROR_") and isinstance(value, int)
}


def _error(name: str) -> pynvml.NVMLError:
    return pynvml.NVMLError(getattr(pynvml, f"NVML_ERROR_{name}"))


def _plain(value: Any) -> Any:
    """A ctypes struct or bytes answer as JSON."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, SimpleNamespace):  # a replayed struct
        return {key: _plain(item) for key, item in vars(value).items()}
    if hasattr(value, "_fields_"):
        return {field[0]: _plain(getattr(value, field[0])) for field in value._fields_}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _struct(value: Any) -> Any:
    return SimpleNamespace(**value) if isinstance(value, dict) else value


class ReplayNvml:
    """Stands in for the pynvml module, answering from a recording."""

    NVMLError = pynvml.NVMLError
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound

    def __init__(self, recording: dict[str, Any], init_error: str | None = None):
        self._system = recording.get("system", {})
        self._devices = recording.get("devices", [])
        self._init_error = init_error
        self._recording = recording
        self._events = list(recording.get("events", []))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("NVML_"):
            return getattr(pynvml, name)
        if name.startswith("nvmlDevice"):
            return self._device_call(name)
        if name.startswith("nvmlSystem"):

            def system_call() -> Any:
                if name not in self._system:
                    raise _error("NOT_SUPPORTED")
                return self._answer(self._system[name])

            system_call.__name__ = name
            return system_call
        raise AttributeError(name)

    @staticmethod
    def _answer(answer: Any) -> Any:
        if isinstance(answer, dict) and "nvml_error" in answer:
            raise _error(answer["nvml_error"])
        return _struct(answer)

    def nvmlInit(self) -> None:
        if self._init_error:
            raise _error(self._init_error)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlEventSetCreate(self) -> list[int]:
        if "events" not in self._recording:
            raise _error("NOT_SUPPORTED")
        return []  # the devices registered on this set

    def nvmlDeviceRegisterEvents(self, handle: int, types: int, events: list[int]) -> None:
        if types & pynvml.nvmlEventTypeXidCriticalError:
            events.append(handle)

    def nvmlEventSetWait_v2(self, events: list[int], timeout_ms: int) -> SimpleNamespace:
        while self._events:
            event = self._events.pop(0)
            if event["device"] in events:
                return SimpleNamespace(
                    device=event["device"],
                    eventType=pynvml.nvmlEventTypeXidCriticalError,
                    eventData=event["xid"],
                )
        raise _error("TIMEOUT")

    def nvmlEventSetFree(self, events: list[int]) -> None:
        return None

    def _device_call(self, name: str) -> Any:
        def call(handle: int, *args: Any) -> Any:
            answers = self._devices[handle].get(name)
            key = ",".join(str(a) for a in args)
            if answers is None or key not in answers:
                raise _error("NOT_SUPPORTED")
            return self._answer(answers[key])

        call.__name__ = name
        return call


class RecordingNvml:
    """Wraps pynvml (or another library with its API) and writes down every answer."""

    def __init__(self, library: Any = pynvml) -> None:
        self.recording: dict[str, Any] = {"system": {}, "devices": []}
        self._library = library
        self._handles: dict[int, int] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._library, name)
        if (
            not callable(real)
            or not name.startswith("nvml")
            or name in ("nvmlInit", "nvmlShutdown")
        ):
            return real

        def call(*args: Any) -> Any:
            device = None
            if args and name.startswith("nvmlDevice") and name != "nvmlDeviceGetHandleByIndex":
                device, args = self._handles[id(args[0])], args[1:]
            try:
                answer = real(*args) if device is None else real(self._handle(device), *args)
                saved: Any = _plain(answer)
            except pynvml.NVMLError as err:
                answer, saved = err, {"nvml_error": _ERROR_NAMES.get(err.value, "UNKNOWN")}
            if name == "nvmlDeviceGetHandleByIndex" and not isinstance(answer, Exception):
                self._handles[id(answer)] = args[0]
                self._device_answers(args[0])
            elif device is not None:
                key = ",".join(str(a) for a in args)
                self._device_answers(device).setdefault(name, {})[key] = saved
            else:
                self.recording["system"][name] = saved
            if isinstance(answer, Exception):
                raise answer
            return answer

        call.__name__ = name
        return call

    def _device_answers(self, index: int) -> dict[str, Any]:
        while len(self.recording["devices"]) <= index:
            self.recording["devices"].append({})
        device: dict[str, Any] = self.recording["devices"][index]
        return device

    def _handle(self, index: int) -> Any:
        return self._library.nvmlDeviceGetHandleByIndex(index)


def record(path: Path, library: Any = pynvml) -> dict[str, Any]:
    """Run the nvml_facts boundary against NVML and save what it was told."""
    from cluster_plan.exporters.gpu import read_nvml

    recorder = RecordingNvml(library)
    facts: dict[str, Any] = load_nvml_facts().query_nvml(recorder)
    read_nvml(recorder)  # the exporter's calls too, so one recording replays through both
    path.write_text(json.dumps(recorder.recording, indent=1) + "\n")
    return facts


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "record":
        print("usage: python tests/gpu/nvml_replay.py record OUT.json", file=sys.stderr)
        raise SystemExit(2)
    print(json.dumps(record(Path(sys.argv[2])), indent=1))
