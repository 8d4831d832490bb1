"""Prompts from the text templates in `prompts/` (or a user's folder that overrides them by name).

Templates use `$name` placeholders (string.Template), so code and braces in them need no
escaping; a missing template or placeholder is an error, never a silent default.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.errors import UserError
from kernelsmith.evaluate.verdict import candidate_flags
from kernelsmith.evolve.config import PromptConfig
from kernelsmith.evolve.profile_block import profile_parts
from kernelsmith.evolve.program import NO_PROGRAM, Program

BUNDLED = Path(__file__).parent / "prompts"
OPERATORS = ("translate", "rewrite", "diff", "crossover", "repair")


def hardware_text(hw: dict) -> str:
    if hw.get("device") != "cuda":
        return (
            f"{hw.get('name', 'CPU')} running the Triton interpreter: it checks correctness; its timings say "
            "little about GPU speed, so favour kernels that are sound on a GPU."
        )
    parts = [
        f"{hw['name']} (compute capability {hw.get('capability', '?')}): {hw.get('sm_count', '?')} SMs, "
        f"{hw.get('memory_gb', '?')} GB memory"
    ]
    if hw.get("bandwidth_gbps"):
        parts.append(f"measured copy bandwidth {hw['bandwidth_gbps']} GB/s")
    if hw.get("bf16_tflops"):
        parts.append(f"measured dense bf16 matmul {hw['bf16_tflops']} TFLOP/s")
    return "; ".join(parts) + "."


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}x"


def metrics_line(p: Program) -> str:
    if p.status == NO_PROGRAM:
        return "status: no program (the reply held no usable code)"
    if p.status != "correct":
        return f"status: {p.status}"
    ev = p.eval or {}
    line = f"status: correct; speedup {_x(p.speedup)} vs PyTorch eager, {_x(p.speedup_vs_compile)} vs torch.compile"
    if p.candidate_ms is not None:
        line += f"; runtime {p.candidate_ms:.4g} ms"
        if ev.get("reference_ms") is not None:
            line += f" (eager {ev['reference_ms']:.4g} ms"
            line += f", torch.compile {ev['compile_ms']:.4g} ms)" if ev.get("compile_ms") is not None else ")"
    if p.status == "correct" and not p.ok:
        line += f"; flagged {', '.join(candidate_flags(p.flags))}, so it does not count as a success"
    return line


@dataclass
class PromptParts:
    """What one prompt shows; the engine fills it from the archive and the store."""

    operator: str
    task_name: str
    task_code: str
    hardware: dict
    parent: Program | None = None
    second: Program | None = None  # crossover's other parent
    top: list[Program] = field(default_factory=list)
    inspirations: list[Program] = field(default_factory=list)
    history: list[Program] = field(default_factory=list)


class PromptBuilder:
    def __init__(self, cfg: PromptConfig):
        self.cfg = cfg
        self.dirs = ([Path(cfg.templates_dir)] if cfg.templates_dir else []) + [BUNDLED]
        if cfg.templates_dir and not Path(cfg.templates_dir).is_dir():
            raise UserError(f"prompts.templates_dir {cfg.templates_dir} is not a folder")
        self._cache: dict[str, string.Template] = {}

    def template(self, name: str) -> string.Template:
        if name not in self._cache:
            for d in self.dirs:
                if (d / f"{name}.txt").is_file():
                    self._cache[name] = string.Template((d / f"{name}.txt").read_text(encoding="utf-8"))
                    break
            else:
                raise UserError(f"prompt template {name}.txt not found in {', '.join(map(str, self.dirs))}")
        return self._cache[name]

    def render(self, name: str, **values) -> str:
        try:
            return self.template(name).substitute(**values)
        except KeyError as exc:
            raise UserError(f"prompt template {name}.txt uses ${exc.args[0]}, which is not provided") from None

    def feedback(self, p: Program) -> str:
        parts = []
        if p.error:
            text = p.error if len(p.error) <= self.cfg.error_chars else p.error[: self.cfg.error_chars] + " [...]"
            parts.append(f"feedback from the evaluator:\n{text}")
        details = (p.eval or {}).get("flag_details") or {}
        # A rejection's error is its flag's detail: say it once.
        parts += [f"flag {k}: {v}" for k, v in details.items() if v != p.error]
        return "".join("\n" + x for x in parts)

    def profile(self, p: Program) -> str:
        """Where a correct program's device time goes (profile.txt), or nothing."""
        parts = profile_parts(p.eval or {}, self.cfg.profile_chars) if p.status == "correct" else None
        return "\n" + self.render("profile", **parts).rstrip("\n") if parts else ""

    def program(self, title: str, p: Program, profile: bool = False) -> str:
        return self.render(
            "program",
            title=title,
            metrics=metrics_line(p),
            feedback=self.feedback(p),
            profile=self.profile(p) if profile else "",
            code=(p.code or "").rstrip("\n"),
        )

    def history_line(self, p: Program) -> str:
        origin = p.operator + (f" of #{p.parent_id}" if p.parent_id is not None else "")
        outcome = metrics_line(p).removeprefix("status: ")
        if p.error and p.status != "correct":
            first = " ".join(p.error.split())[:240]
            outcome += f": {first}"
        return f"- #{p.id} (iteration {p.iteration}, {origin}): {outcome}"

    def sections(self, parts: PromptParts) -> str:
        out = []
        if parts.parent is not None:
            out.append("# Current program\n" + self.program(f"program #{parts.parent.id}", parts.parent, profile=True))
        if parts.second is not None:
            out.append("# Second parent\n" + self.program(f"program #{parts.second.id}", parts.second, profile=True))
        if parts.top:
            out.append("# Best programs so far\n" + "\n".join(self.program(f"program #{p.id}", p) for p in parts.top))
        if parts.inspirations:
            out.append(
                "# Different approaches that also work\n"
                + "\n".join(self.program(f"program #{p.id}", p) for p in parts.inspirations)
            )
        if parts.history:
            out.append("# Recent attempts (newest first)\n" + "\n".join(self.history_line(p) for p in parts.history))
        return "".join("\n" + s for s in out) + ("\n" if out else "")

    def messages(self, parts: PromptParts) -> list[dict]:
        if parts.operator not in OPERATORS:
            raise ValueError(f"unknown operator {parts.operator}")
        answer = self.render("format_diff" if parts.operator == "diff" else "format_rewrite")
        system = self.render("system", answer_format=answer)
        user = self.render(
            "user",
            task_name=parts.task_name,
            task_code=parts.task_code.rstrip("\n"),
            hardware=hardware_text(parts.hardware),
            sections=self.sections(parts),
            instruction=self.render(f"op_{parts.operator}").rstrip("\n"),
        )
        return [{"role": "system", "content": system.rstrip("\n")}, {"role": "user", "content": user.rstrip("\n")}]
