"""The configuration of one MSA layer (SPEC sections 1-3): what the file contract's msa_config holds. Head counts
and dims are not part of it: they come from the shapes of the tensors each call is given."""
import dataclasses
import json

from . import _core


@dataclasses.dataclass(frozen=True)
class Config:
    """An MSA layer's selection and attention settings (M3's by default). Checked when made: a bad field is a
    ValueError naming it, its value and the rule."""

    block_size: int = 128
    top_k: int = 16
    init_blocks: int = 0
    local_blocks: int = 1
    pooling: str = "max"  # "max" | "lse" | "mean"
    softmax_scale: float | None = None  # None: 1 / sqrt(D)
    index_scale: float | None = None  # None: 1 / sqrt(Di)
    index_format: str = "native"  # "native" | "e4m3"
    score_format: str = "native"  # "native" | "fp16"

    def __post_init__(self):
        for field in ("block_size", "top_k", "init_blocks", "local_blocks"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Config.{field} = {value!r}: must be an int")
        for field in ("softmax_scale", "index_scale"):
            value = getattr(self, field)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"Config.{field} = {value!r}: must be a number or None")
        try:
            _core.validate_config(self.to_json(), "Config")
        except ValueError as error:  # "Config: msa_config.top_k = 0: ..." -> "Config.top_k = 0: ..."
            raise ValueError(str(error).replace("Config: msa_config.", "Config.", 1)) from None

    def to_json(self) -> str:
        """The msa_config JSON object of the file contract (SPEC section 7); unset scales are left out."""
        fields = {name: value for name, value in dataclasses.asdict(self).items() if value is not None}
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str) -> "Config":
        """The Config of an msa_config JSON object (a golden's or an inputs file's): the known keys only; head counts
        and dims, which manifests record beside them, are left to the shapes."""
        fields = json.loads(text)
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in fields.items() if key in known})
