package io.segmentlake.storage;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsAction;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.NativeCodeLoader;

/**
 * Hadoop's checksummed local file system, setting permissions in-process.
 *
 * <p>Without Hadoop's native library (pip's pyspark ships none), RawLocalFileSystem sets a
 * file's permission by forking {@code chmod}, and Spark's writers set one on every file and
 * checksum they create: measured here, a Delta write of 810 small files spent most of its 31 s
 * forking. This class sets the same POSIX bits with java.nio and defers to Hadoop where it
 * could not do the same (a sticky bit, a non-POSIX file system, the native library present).
 */
public class NioLocalFileSystem extends LocalFileSystem {

  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (unchecksummed) file system under {@link NioLocalFileSystem}. */
  public static class Raw extends RawLocalFileSystem {

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      if (NativeCodeLoader.isNativeCodeLoaded() || permission.getStickyBit()) {
        super.setPermission(path, permission);
        return;
      }
      java.nio.file.Path local = pathToFile(path).toPath();
      try {
        Files.setPosixFilePermissions(local, posix(permission));
      } catch (UnsupportedOperationException e) {
        super.setPermission(path, permission);
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + path + " does not exist");
      }
    }

    private static Set<PosixFilePermission> posix(FsPermission permission) {
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      add(bits, permission.getUserAction(), PosixFilePermission.OWNER_READ,
          PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE);
      add(bits, permission.getGroupAction(), PosixFilePermission.GROUP_READ,
          PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE);
      add(bits, permission.getOtherAction(), PosixFilePermission.OTHERS_READ,
          PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);
      return bits;
    }

    private static void add(Set<PosixFilePermission> bits, FsAction action,
        PosixFilePermission read, PosixFilePermission write, PosixFilePermission execute) {
      if (action.implies(FsAction.READ)) {
        bits.add(read);
      }
      if (action.implies(FsAction.WRITE)) {
        bits.add(write);
      }
      if (action.implies(FsAction.EXECUTE)) {
        bits.add(execute);
      }
    }
  }
}
