from tokenmill.resources.lake import LakeResource

__all__ = ["LakeResource"]
