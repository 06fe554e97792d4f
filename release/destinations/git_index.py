"""The git-index kind: a directory of a git repository that lists a github destination's
wheels, one folder per local label, beside other projects' pages (sgl-project/whl's
`cu129/`, `cu130/`), served by whoever serves that repository (GitHub Pages).

It holds no wheels, so it has no publisher: what the stages ask of it is to write the index
pages of the destinations it lists (`push_index`), which release.publish.run hands it in
place of `--index-dir` and GitHub Pages. The pages go in as one commit, merged with the other
projects' pages already there (release.remote.gitindex: never deleting or changing them),
with the token of its `token-secret` from the command's Reach. What verify checks of it is
the github destination's index: its `index-url` is this one's (release.matrix.gitindex).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from packaging.utils import canonicalize_name

from release.destinations.base import IndexWritten, KindBase
from release.destinations.index import root_page
from release.destinations.reach import Reach
from release.errors import PublishError
from release.records.manifest import IndexRef
from release.remote.gitindex import GitIndexTarget, carries_token, check_pages, push_pages
from release.remote.gitpages import PROJECT_PAGES, PackagePages


def root_pages(label: str, projects: Sequence[str]) -> Mapping[str, bytes]:
    """A label's root pages listing the project folders it holds, as `render_index` writes
    them for an index of one project."""
    html, json = root_page(f"Simple index ({label})", projects)
    return {"index.html": html, "index.json": json}


class GitIndexKind(KindBase):
    name = "git-index"

    def check_index(
        self, index: IndexRef, labels: Collection[str], reach: Reach, *, project: str
    ) -> None:
        """Before anything of the release is published: the token is there and may go to
        the remote, git reaches the branch, and nothing that is not `project`'s stands where
        its pages of `labels` go (PublishError naming it; nothing is pushed)."""
        pages = PackagePages(
            project=str(canonicalize_name(project)),
            pages={label: dict.fromkeys(PROJECT_PAGES, b"") for label in labels},
        )
        check_pages(self._target(index, reach), pages, root_pages=root_pages, environ=reach.environ)

    def _target(self, index: IndexRef, reach: Reach) -> GitIndexTarget:
        if index.token_secret:
            reach.require_github_token(index.name, index.token_secret)
        url = index.url or ""
        return GitIndexTarget(
            url=url,
            branch=index.branch or "",
            directory=index.directory or "",
            # the job's trust of a remote matters only where the token goes to it
            token=reach.token_for(url, index.token_secret)
            if carries_token(url)
            else reach.token(index.token_secret),
        )

    def push_index(
        self,
        index: IndexRef,
        tree: Mapping[str, bytes],
        reach: Reach,
        *,
        project: str,
        version: str,
    ) -> IndexWritten:
        """One commit of `tree`'s pages of `project` on the index's branch, pushed (fetched
        again and re-applied where another commit won the race; the branch as it was where
        every push is refused: PublishError)."""
        target = self._target(index, reach)
        try:
            pages = PackagePages.from_rendered(tree, project)
        except ValueError as error:
            raise PublishError(f"{index.name}: cannot write the index: {error}") from None
        pushed = push_pages(
            target, pages, root_pages=root_pages, version=version, environ=reach.environ
        )
        directory = f"{index.directory}/" if index.directory else ""
        return IndexWritten(
            where=f"{target.shown} {directory}<label>/",
            commit=pushed.commit,
            changed=pushed.changed,
        )


GIT_INDEX = GitIndexKind()
