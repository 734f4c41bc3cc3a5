package beamsparkrunner.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system, setting permissions with java.nio.
 *
 * <p>Without Hadoop's native library (the pyspark wheel has none), {@link RawLocalFileSystem}
 * sets a file's permission by running the {@code chmod} program: a process forked from the
 * JVM for every file Spark writes with a permission, which a streaming query does for each
 * state store file, checkpoint log entry and temporary file of every micro-batch (about 40
 * processes per micro-batch of a query with two stateful operators). This class makes the
 * same change through {@link Files#setPosixFilePermissions}, in the JVM.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
  // Bit i of a POSIX mode, from the lowest (others' execute).
  private static final PosixFilePermission[] MODE_BITS = {
    PosixFilePermission.OTHERS_EXECUTE,
    PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE,
    PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE,
    PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  /** The permissions of a POSIX mode's lower nine bits (sticky and set-id bits are not kept). */
  public static Set<PosixFilePermission> permissionsOf(short mode) {
    Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < MODE_BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        permissions.add(MODE_BITS[bit]);
      }
    }
    return permissions;
  }

  @Override
  public void setPermission(Path p, FsPermission permission) throws IOException {
    Files.setPosixFilePermissions(pathToFile(p).toPath(), permissionsOf(permission.toShort()));
  }
}
