package beamsparkrunner.fs;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * The {@code file:} file system of local sessions the runner starts ({@code fs.file.impl}):
 * Hadoop's checksummed local file system over {@link NioRawLocalFileSystem}.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
