"""The catalogue: one record per sampler (and, in sibling modules, per op and quant format)."""
from properties.catalogue.record import SamplerRecord
from properties.catalogue.samplers import RECORDS, RECORDS_BY_NAME


def sampler_records(*kinds: str, impl_only: bool = False) -> list[SamplerRecord]:
    return [r for r in RECORDS if (not kinds or r.kind in kinds) and (r.has_impl or not impl_only)]


__all__ = ["SamplerRecord", "RECORDS", "RECORDS_BY_NAME", "sampler_records"]
