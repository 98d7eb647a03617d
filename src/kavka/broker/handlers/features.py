"""Feature flags (KIP-584): what ApiVersions (v3+) advertises, and UpdateFeatures (API 57).

kavka's feature levels are fixed by the code, not chosen by an operator: each feature is finalized
at the level kavka implements (its supported range ends there, and starts there too unless the
protocol of lower levels is still served to clients that ask for it). They say what a Kafka
client may rely on:

- group.version 1: the KIP-848 consumer rebalance protocol (ConsumerGroupHeartbeat) is served;
- transaction.version 2: transactions v2 (KIP-890 part 2) are served, so Kafka's 4.x producers
  use them (they switch on a finalized transaction.version >= 2: EndTxn v5, Produce v12,
  TxnOffsetCommit v5), as on a Kafka 4.x cluster; clients that do not know the feature keep the
  KIP-98 protocol, also served (supported range 0-2);
- kraft.version (supported 0-1) as the node's quorum runs: finalized 1 for a dynamic quorum (its
  voter set in the metadata log, KIP-853: `kavka storage format --standalone/--initial-controllers/
  --no-initial-controllers`), 0 for a static one (controller.quorum.voters), which UpdateFeatures
  upgrades to 1 as Kafka 4.1 does (the active controller writes the voters into the log; every
  voter must have fetched from it, naming its directory id), never back;
- eligible.leader.replicas.version 1: the controller keeps eligible leader replicas and elects
  one when the ISR is empty (KIP-966), as a new Kafka 4.1 cluster does; 0 when the controllers run
  with eligible.leader.replicas.enable=false (the one level an operator chooses, by that config).

metadata.version is not advertised: it names versions of Kafka's metadata log records, and
kavka's metadata log records are its own (JSON, metadata.records), so no level would be true.

As Kafka, ApiVersions lists a feature as finalized only at a level above 0, leaves out of v3 the
supported features whose minimum is 0 (KAFKA-17011: v3 clients fail on them; v4 lists them), and
gives as the finalized features' epoch the offset of the metadata image it answers from. UpdateFeatures
answers Kafka's FeatureControlManager errors: a level kavka does not implement is
INVALID_UPDATE_VERSION ("Invalid update version V for feature F. ..."), the finalized level itself
is a successful no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kavka.protocol import api
from kavka.protocol.messages import NO_THROTTLE, field_names, make, nested

if TYPE_CHECKING:
    from kavka.broker.node import BrokerNode
    from kavka.broker.server import RequestContext


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    level: int  # the level kavka implements: supported max = finalized
    min_level: int | None = None  # the supported minimum (None: the level itself)
    config: str | None = None  # the boolean config that finalizes it at `level` (else 0)

    @property
    def supported_min(self) -> int:
        return self.level if self.min_level is None else self.min_level


KRAFT_VERSION = "kraft.version"
FEATURES: tuple[Feature, ...] = (
    Feature("eligible.leader.replicas.version", 1, min_level=0, config="eligible.leader.replicas.enable"),
    Feature("group.version", 1),
    Feature(KRAFT_VERSION, 1, min_level=0),  # finalized: the quorum's (`finalized_level`)
    Feature("transaction.version", 2, min_level=0),
)
_BY_NAME = {f.name: f for f in FEATURES}


def finalized_level(f: Feature, kraft_version: int, config: Mapping[str, Any] | None = None) -> int:
    """The level in force: the feature's own, but kraft.version is the quorum's (0 static, 1 dynamic)
    and a feature with a config is finalized at 0 when that config is false."""
    if f.name == KRAFT_VERSION:
        return kraft_version
    return f.level if f.config is None or config is None or config[f.config] else 0

# UpdateFeatures' UpgradeType (v1+): 1 upgrade, 2 safe downgrade, 3 unsafe downgrade.
_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE = 1, 2, 3


def api_versions_features(
    resp_cls: type, image_offset: int, version: int = 4, kraft_version: int = 0,
    config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The KIP-584 fields of an ApiVersions response (v3+; none below); `kraft_version` is the
    quorum's (RaftClient.kraft_version), `config` the node's (features a config finalizes)."""
    if "supported_features" not in field_names(resp_cls):
        return {}
    levels = {f.name: finalized_level(f, kraft_version, config) for f in FEATURES}
    supported, finalized = nested(resp_cls, "SupportedFeatureKey"), nested(resp_cls, "FinalizedFeatureKey")
    return {
        "supported_features": tuple(
            make(supported, name=f.name, min_version=f.supported_min, max_version=f.level)
            for f in FEATURES if version >= 4 or f.supported_min > 0),
        "finalized_features": tuple(
            make(finalized, name=f.name, max_version_level=levels[f.name], min_version_level=levels[f.name])
            for f in FEATURES if levels[f.name] > 0
        ),
        "finalized_features_epoch": max(image_offset, 0),
    }


def update_error(
    node_id: int, feature: str, version: int, upgrade_type: int, config: Mapping[str, Any],
    kraft_version: int = 0,
) -> tuple[ErrorCode, str | None]:
    """Kafka's FeatureControlManager.updateFeature checks, in its order, for kavka's fixed levels."""
    def invalid(reason: str) -> tuple[ErrorCode, str]:
        return ErrorCode.invalid_update_version, f"Invalid update version {version} for feature {feature}. {reason}"

    if upgrade_type not in (_UPGRADE, _SAFE_DOWNGRADE, _UNSAFE_DOWNGRADE):
        return invalid("The controller does not support the given upgrade type.")
    if version < 0:
        return invalid("A feature version cannot be less than 0.")
    f = _BY_NAME.get(feature)
    if f is None:
        if version == 0:
            return ErrorCode.none, None  # disabling a feature that is not there: nothing to do
        return invalid(f"Local controller {node_id} does not support this feature.")
    if f.name == KRAFT_VERSION and f.supported_min <= version <= f.level:
        if version < kraft_version:  # Kafka's KafkaRaftClient words
            return (ErrorCode.invalid_update_version, f"Invalid upgrade of {KRAFT_VERSION} from version "
                    f"{kraft_version} to {version} because the new version is a downgrade")
        return ErrorCode.none, None  # an upgrade is the active controller's (handle_update_features)
    if f.config is not None and f.supported_min <= version <= f.level:
        level = finalized_level(f, kraft_version, config)
        if version == level:
            return ErrorCode.none, None
        return invalid(f"kavka finalizes this feature at {level} by {f.config}={str(bool(level)).lower()} "
                       f"on the controllers.")
    if f.supported_min <= version < f.level:
        return invalid(f"kavka's level of this feature is fixed at {f.level}: the protocol of lower "
                       f"levels is served to the clients that ask for it.")
    if version != f.level:
        return invalid(f"Local controller {node_id} only supports versions {f.supported_min}-{f.level}")
    return ErrorCode.none, None


async def handle_update_features(node: BrokerNode, ctx: RequestContext, req: Any) -> Any:
    """UpdateFeatures (API 57): v0-v1 answer per feature; v2 only with the first error (KIP-1022).
    An upgrade of kraft.version (a static quorum made dynamic, Kafka 4.1) goes to the active
    controller, whose raft leader writes the voter set into the log; the other features are
    answered here."""
    cls = api.response_schema(ctx.api_key, ctx.api_version)
    results = []
    for u in req.feature_updates:
        # v0 has AllowDowngrade instead of UpgradeType (v1+): true means a safe downgrade
        upgrade_type = getattr(u, "upgrade_type", _SAFE_DOWNGRADE if getattr(u, "allow_downgrade", False) else _UPGRADE)
        kraft_version = node.shared.raft.kraft_version
        error, message = update_error(node.node_id, u.feature, u.max_version_level, upgrade_type, node.config,
                                       kraft_version)
        if error == ErrorCode.none and u.feature == KRAFT_VERSION and u.max_version_level > kraft_version:
            error, message = await node.shared.controller.update_kraft_version(
                int(u.max_version_level), bool(req.validate_only))
        results.append((u.feature, error, message))
    if ctx.api_version >= 2:
        first = next((r for r in results if r[1] != ErrorCode.none), None)
        return make(cls, throttle_time=NO_THROTTLE, error_code=first[1] if first else ErrorCode.none,
                    error_message=first[2] if first else None, results=())
    result_cls = nested(cls, "UpdatableFeatureResult")
    return make(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None, results=tuple(
        make(result_cls, feature=f, error_code=e, error_message=m) for f, e, m in results))
