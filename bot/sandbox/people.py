"""The sandbox's people, matching the bundled example policy's user ids."""

from __future__ import annotations

REQUESTER = "U0ALICE"
RELEASE_MANAGER = "U0REL1"
RELEASE_MANAGER_2 = "U0REL2"
SECURITY = "U0SEC1"
OUTSIDER = "U0MALLORY"
CHANNEL = "C0CHANGES"

USERS = {
    REQUESTER: "alice",
    RELEASE_MANAGER: "ravi",
    RELEASE_MANAGER_2: "rosa",
    SECURITY: "sam",
    OUTSIDER: "mallory",
}
USERGROUPS = {"S0RELMGR": [RELEASE_MANAGER, RELEASE_MANAGER_2]}
