package io.segmentlake.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A Delta LogStore for local {@code file:} paths that is safe across JVMs.
 *
 * <p>Delta's default local store ({@code HDFSLogStore}) checks whether log version N exists and
 * then renames a temp file onto it; that check-then-act is guarded only inside one JVM, so two
 * Spark drivers can both "win" version N and one commit silently disappears. Here the version
 * file is published with a hard link, which the OS creates only if the name is free: exactly one
 * writer wins, every other gets {@link FileAlreadyExistsException}, which Delta reads as "a
 * concurrent commit took this version" and answers with its conflict check and retry.
 *
 * <p>Configure with {@code spark.delta.logStore.file.impl=io.segmentlake.storage.PutIfAbsentLogStore}.
 */
public class PutIfAbsentLogStore extends HadoopFileSystemLogStore {

  public PutIfAbsentLogStore(Configuration initHadoopConf) {
    super(initHadoopConf);
  }

  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
      throws IOException {
    java.nio.file.Path target = toLocal(path, hadoopConf);
    java.nio.file.Path dir = target.getParent();
    if (dir == null || !Files.isDirectory(dir)) {
      // Same answer as Delta's own stores: a missing _delta_log is not ours to create here.
      throw new FileNotFoundException("No such file or directory: " + dir);
    }
    if (!overwrite && Files.exists(target)) {
      // Cheap early exit; the link below is what actually decides.
      throw new FileAlreadyExistsException(target.toString());
    }
    java.nio.file.Path temp = dir.resolve(createTempPath(path).getName());
    try {
      writeDurably(temp, actions);
      if (overwrite) {
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } else {
        Files.createLink(target, temp);
      }
      syncDirectory(dir);
    } catch (NoSuchFileException e) {
      // The table directory vanished under us; Delta expects FileNotFoundException for that.
      FileNotFoundException fnf = new FileNotFoundException(e.getMessage());
      fnf.initCause(e);
      throw fnf;
    } finally {
      Files.deleteIfExists(temp);
    }
  }

  @Override
  public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
    // This answers for the file system, not for write(): Delta writes checkpoint Parquet itself
    // and must stage it under a temp name when a local file is visible while half-written.
    return true;
  }

  private static void writeDurably(java.nio.file.Path temp, Iterator<String> actions)
      throws IOException {
    try (FileChannel channel =
        FileChannel.open(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
      OutputStream out = Channels.newOutputStream(channel);
      while (actions.hasNext()) {
        out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      out.flush();
      // A commit that returned must survive a crash: the link publishes these bytes, not a hole.
      channel.force(true);
    }
  }

  /** The new name must survive a crash as the bytes do: a commit reported done stays done. */
  private static void syncDirectory(java.nio.file.Path dir) throws IOException {
    try (FileChannel channel = FileChannel.open(dir, StandardOpenOption.READ)) {
      channel.force(true);
    } catch (IOException e) {
      // Some file systems cannot open or sync a directory; the link itself has landed.
    }
  }

  private static java.nio.file.Path toLocal(Path path, Configuration hadoopConf)
      throws IOException {
    URI uri = path.getFileSystem(hadoopConf).makeQualified(path).toUri();
    if (!"file".equals(uri.getScheme())) {
      throw new IOException(
          "PutIfAbsentLogStore handles only local file: paths, got " + uri
              + "; configure it with spark.delta.logStore.file.impl only");
    }
    return Paths.get(uri);
  }
}
